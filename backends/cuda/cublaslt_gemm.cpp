#include "backends/cuda/cublaslt_gemm.h"

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"

namespace tb::cuda {
namespace {

constexpr std::size_t kMaxWorkspace = std::size_t{64} << 20;

Status lt_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  const std::string message = fmt::format("{}: {}", what, cublasLtGetStatusString(status));
  return status == CUBLAS_STATUS_NOT_SUPPORTED ? Status::Unimplemented(message)
                                               : Status::Failed(message);
}

cudaDataType_t storage_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::tf32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt gets B as its first
// matrix and A as its second, with m and n swapped, and no copy is made.
class LtGemmPlan final : public CudaPlan {
 public:
  LtGemmPlan(cublasLtHandle_t handle, const GemmOp& op) : handle_(handle), op_(op) {}
  ~LtGemmPlan() override {
    if (preference_) cublasLtMatmulPreferenceDestroy(preference_);
    for (auto* layout : {first_, second_, output_})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }

  Status init() {
    const auto storage = [](DType dtype) { return dtype == DType::tf32 ? DType::f32 : dtype; };
    const std::size_t a_size = dtype_size(storage(op_.a_type)), c_size = dtype_size(op_.c_type);
    operands_ = {
        {"a",
         storage(op_.a_type),
         {op_.batch, op_.m, op_.k},
         op_.batch * op_.m * op_.k * a_size,
         false},
        {"b",
         storage(op_.b_type),
         {op_.batch, op_.k, op_.n},
         op_.batch * op_.k * op_.n * a_size,
         false},
        {"c", op_.c_type, {op_.batch, op_.m, op_.n}, op_.batch * op_.m * op_.n * c_size, true}};
    // fp32 is strict: CUBLAS_COMPUTE_32F never down-converts to TF32; tf32 asks for it.
    const cublasComputeType_t compute =
        op_.a_type == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    math_mode_ = op_.a_type == DType::tf32  ? "tf32 inputs, fp32 accumulation"
                 : op_.a_type == DType::f32 ? "strict fp32 (CUBLAS_COMPUTE_32F)"
                                            : "fp32 accumulation";
    TB_RETURN_IF_ERROR(lt_status(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F),
                                 "cublasLtMatmulDescCreate"));
    const cublasOperation_t first_op = op_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t second_op = op_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof(first_op));
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second_op,
                                   sizeof(second_op));
    const std::int64_t m = op_.m, n = op_.n, k = op_.k;
    // Column-major views of the row-major buffers: B (k x n) is n x k, A (m x k) is k x m.
    TB_RETURN_IF_ERROR(layout(&first_, storage_type(op_.b_type), op_.trans_b ? k : n,
                              op_.trans_b ? n : k, op_.trans_b ? k : n, k * n));
    TB_RETURN_IF_ERROR(layout(&second_, storage_type(op_.a_type), op_.trans_a ? m : k,
                              op_.trans_a ? k : m, op_.trans_a ? m : k, m * k));
    TB_RETURN_IF_ERROR(layout(&output_, storage_type(op_.c_type), n, m, n, m * n));

    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatmulPreferenceCreate(&preference_), "cublasLtMatmulPreferenceCreate"));
    cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &kMaxWorkspace, sizeof(kMaxWorkspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatmulAlgoGetHeuristic(handle_, desc_, first_, second_, output_, output_,
                                                 preference_, 1, &result, &found),
                  "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0) return Status::Unimplemented("cuBLASLt has no algorithm for this GEMM");
    algo_ = result.algo;
    workspace_bytes_ = result.workspaceSize;
    int algo_id = 0, tile = 0, stages = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof(algo_id),
                                         nullptr);
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile),
                                         nullptr);
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                         sizeof(stages), nullptr);
    implementation_ =
        fmt::format("cublasLt algo {} tile {} stages {} (waves {:.2f}, workspace {} B)", algo_id,
                    tile, stages, result.wavesCount, result.workspaceSize);
    return Status::Ok();
  }

  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    return lt_status(
        cublasLtMatmul(handle_, desc_, &op_.alpha, operands[1].data, first_, operands[0].data,
                       second_, &op_.beta, operands[2].data, output_, operands[2].data, output_,
                       &algo_, workspace.data, workspace.bytes, stream),
        "cublasLtMatmul");
  }

 private:
  Status layout(cublasLtMatrixLayout_t* out, cudaDataType_t type, std::int64_t rows,
                std::int64_t cols, std::int64_t leading, std::int64_t stride) {
    TB_RETURN_IF_ERROR(lt_status(cublasLtMatrixLayoutCreate(out, type, rows, cols, leading),
                                 "cublasLtMatrixLayoutCreate"));
    if (op_.batch > 1) {
      const int batch = static_cast<int>(op_.batch);
      cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                       sizeof(batch));
      cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                       sizeof(stride));
    }
    return Status::Ok();
  }

  cublasLtHandle_t handle_;
  GemmOp op_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, output_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace

Status plan_cublaslt_gemm(cublasLtHandle_t handle, const GemmOp& op, std::unique_ptr<Plan>* out) {
  const bool inputs_ok =
      op.a_type == op.b_type && (op.a_type == DType::f32 || op.a_type == DType::tf32 ||
                                 op.a_type == DType::bf16 || op.a_type == DType::f16);
  if (!inputs_ok)
    return Status::Unimplemented(
        fmt::format("cuda: no {} GEMM yet (fp8 comes later)", dtype_name(op.a_type)));
  const bool low_precision_in = op.a_type == DType::bf16 || op.a_type == DType::f16;
  if (op.c_type != DType::f32 && !(low_precision_in && op.c_type == op.a_type))
    return Status::Unimplemented(fmt::format("cuda: {} inputs with a {} output",
                                             dtype_name(op.a_type), dtype_name(op.c_type)));
  if (op.prepacked_b) return Status::Unimplemented("cuda: no pre-packed layout in cuBLASLt");
  auto plan = std::make_unique<LtGemmPlan>(handle, op);
  TB_RETURN_IF_ERROR(plan->init());
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace tb::cuda
