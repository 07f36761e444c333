#include "backends/cuda/cublaslt_gemm.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/kernels.h"
#include "backends/operands.h"

namespace tb::cuda {
namespace {

constexpr std::size_t kMaxWorkspace = std::size_t{64} << 20;
constexpr std::uint32_t kMinAlignment = 16;

Status lt_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  const std::string message = fmt::format("{}: {}", what, cublasLtGetStatusString(status));
  return status == CUBLAS_STATUS_NOT_SUPPORTED ? Status::Unimplemented(message)
                                               : Status::LibraryFailed(message);
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
    case DType::f8_e4m3:
      return CUDA_R_8F_E4M3;
    default:
      return CUDA_R_32F;
  }
}

// cuBLASLt on the shape lt_gemm_shape() gives: no copies, row-major operands as they are.
class LtGemmPlan final : public CudaPlan {
 public:
  LtGemmPlan(cublasLtHandle_t handle, const GemmOp& op, LtEpilogue epilogue)
      : handle_(handle), op_(op), epilogue_(epilogue) {}
  ~LtGemmPlan() override {
    if (preference_) cublasLtMatmulPreferenceDestroy(preference_);
    for (auto* layout : {first_, second_, output_})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }

  Status init() {
    operands_ = gemm_operands(op_);
    for (OperandSpec& operand : operands_) operand.dtype = storage_dtype(operand.dtype);
    // fp32 is strict: CUBLAS_COMPUTE_32F never down-converts to TF32; tf32 asks for it.
    const cublasComputeType_t compute =
        op_.a_type == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    math_mode_ = op_.a_type == DType::tf32  ? "tf32 inputs, fp32 accumulation"
                 : op_.a_type == DType::f32 ? "strict fp32 (CUBLAS_COMPUTE_32F)"
                                            : "fp32 accumulation";
    TB_RETURN_IF_ERROR(lt_status(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F),
                                 "cublasLtMatmulDescCreate"));
    if (epilogue_ != LtEpilogue::none) TB_RETURN_IF_ERROR(set_epilogue());
    if (fp8()) {
      // No A or B scale pointers: unset, cuBLASLt scales by 1 (the inputs are in range).
      // Setting them after the heuristic chose an algorithm made cublasLtMatmul refuse it on
      // an H200 (NOT_SUPPORTED). Fast accumulation is off by default in cuBLASLt; the
      // datasheet's FP8 rate needs it.
      const std::int8_t fast = op_.fast_accumulation ? 1 : 0;
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
      math_mode_ = op_.fast_accumulation
                       ? "fp8 e4m3 inputs, fast accumulation (promoted to fp32 less often)"
                       : "fp8 e4m3 inputs, fp32 accumulation";
    }
    const LtGemmShape shape = lt_gemm_shape(op_);
    const cublasOperation_t first_op = shape.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t second_op = shape.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof(first_op));
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second_op,
                                   sizeof(second_op));
    TB_RETURN_IF_ERROR(layout(&first_, storage_type(op_.b_type), shape.first, shape.count));
    TB_RETURN_IF_ERROR(layout(&second_, storage_type(op_.a_type), shape.second, shape.count));
    TB_RETURN_IF_ERROR(layout(&output_, storage_type(op_.c_type), shape.output, shape.count));
    calls_ = shape.calls;
    for (auto [index, dtype] : {std::pair{0, op_.a_type}, {1, op_.b_type}, {2, op_.c_type}})
      call_stride_bytes_[index] = shape.call_stride[index] * dtype_size(dtype);

    return choose_algorithm();
  }

  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    const BoundOperands bound(operands_, operands);
    if (epilogue_ != LtEpilogue::none) {
      void* bias = bound.buffer(epilogue_ == LtEpilogue::bias ? "bias" : "diff_bias").data;
      if (reinterpret_cast<std::uintptr_t>(bias) % kMinAlignment != 0)
        return Status::Failed(fmt::format(
            "cuBLASLt epilogue: the bias is not {}-byte aligned as planned", kMinAlignment));
      TB_RETURN_IF_ERROR(
          lt_status(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                   sizeof(bias)),
                    "cuBLASLt bias pointer"));
    }
    for (std::int64_t i = 0; i < calls_; ++i) {
      auto at = [&](const char* name) {
        const int index = operand_index(operands_, name);  // a, b or c: a stride each
        return static_cast<char*>(bound.buffer(name).data) + i * call_stride_bytes_[index];
      };
      TB_RETURN_IF_ERROR(
          lt_status(cublasLtMatmul(handle_, desc_, &op_.alpha, at("b"), first_, at("a"), second_,
                                   &op_.beta, at("c"), output_, at("c"), output_, &algo_,
                                   workspace.data, workspace_bytes_, stream),
                    "cublasLtMatmul"));
    }
    return Status::Ok();
  }

 private:
  // The bias (forward) or bias gradient (backward-weights) as the GEMM's epilogue, and its
  // operand.
  Status set_epilogue() {
    OperandSpec bias;
    TB_RETURN_IF_ERROR(epilogue_operand(op_, epilogue_, &bias));
    const cublasLtEpilogue_t kind =
        epilogue_ == LtEpilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
    const cudaDataType_t bias_type = storage_type(bias.dtype);
    TB_RETURN_IF_ERROR(lt_status(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof(kind)),
        "cuBLASLt epilogue"));
    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                 &bias_type, sizeof(bias_type)),
                  "cuBLASLt bias data type"));
    // The heuristic infers the bias's alignment from this pointer's value: it stands for the
    // real one, which is only known at execution and checked there.
    const void* representative = reinterpret_cast<const void*>(std::uintptr_t{kMinAlignment});
    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                 &representative, sizeof(representative)),
                  "cuBLASLt bias pointer"));
    operands_.push_back(std::move(bias));
    return Status::Ok();
  }

  // cuBLASLt's first heuristic choice for this GEMM, its workspace and its name.
  Status choose_algorithm() {
    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatmulPreferenceCreate(&preference_), "cublasLtMatmulPreferenceCreate"));
    cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &kMaxWorkspace, sizeof(kMaxWorkspace));
    // cuBLASLt assumes 256-byte-aligned pointers unless told otherwise; operands here are
    // 16-byte aligned at least (sub-buffers of one arena, per-batch offsets).
    for (auto attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &kMinAlignment,
                                           sizeof(kMinAlignment));
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
        fmt::format("cublasLt algo {} tile {} stages {} (waves {:.2f}, workspace {} B{}{})",
                    algo_id, tile, stages, result.wavesCount, result.workspaceSize,
                    calls_ > 1 ? fmt::format(", {} calls of {} heads", calls_, op_.heads) : "",
                    epilogue_ == LtEpilogue::bias            ? ", bias in the epilogue"
                    : epilogue_ == LtEpilogue::bias_gradient ? ", bias gradient in the epilogue"
                                                             : "");
    return Status::Ok();
  }

  static Status layout(cublasLtMatrixLayout_t* out, cudaDataType_t type, const LtMatrix& matrix,
                       std::int64_t count) {
    TB_RETURN_IF_ERROR(
        lt_status(cublasLtMatrixLayoutCreate(out, type, matrix.rows, matrix.cols, matrix.ld),
                  "cublasLtMatrixLayoutCreate"));
    if (count > 1) {
      const int batch = static_cast<int>(count);
      cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                       sizeof(batch));
      cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &matrix.batch_stride, sizeof(matrix.batch_stride));
    }
    return Status::Ok();
  }

  cublasLtHandle_t handle_;
  GemmOp op_;
  LtEpilogue epilogue_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, output_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool fp8() const { return op_.a_type == DType::f8_e4m3; }

  std::int64_t calls_ = 1;                  // cublasLtMatmul calls per execution
  std::int64_t call_stride_bytes_[3] = {};  // a, b, c: offset from one call to the next
};

}  // namespace

LtGemmShape lt_gemm_shape(const GemmOp& op) {
  const GemmOperandLayout a = gemm_layout(op, GemmOperand::a), b = gemm_layout(op, GemmOperand::b),
                          c = gemm_layout(op, GemmOperand::c);
  // One strided batch when every operand's batch stride is heads times its head stride;
  // otherwise (head-interleaved operands) a strided batch over the heads, once per batch entry.
  const bool uniform =
      a.batch == op.heads * a.head && b.batch == op.heads * b.head && c.batch == op.heads * c.head;
  LtGemmShape shape;
  shape.calls = uniform ? 1 : op.batch;
  shape.count = uniform ? op.batch * op.heads : op.heads;
  // A row-major stored matrix of r x c is the column-major c x r.
  const std::int64_t m = op.m, n = op.n, k = op.k;
  shape.first = {op.trans_b ? k : n, op.trans_b ? n : k, b.ld, b.head, op.trans_b};
  shape.second = {op.trans_a ? m : k, op.trans_a ? k : m, a.ld, a.head, op.trans_a};
  shape.output = {n, m, c.ld, c.head, false};
  shape.call_stride[0] = a.batch, shape.call_stride[1] = b.batch, shape.call_stride[2] = c.batch;
  return shape;
}

Status fp8_supported(const GemmOp& op, int compute_capability) {
  if (compute_capability < 89)
    return Status::Unimplemented(
        fmt::format("cuda: FP8 GEMM needs compute capability 8.9 or later, this GPU has {}.{}",
                    compute_capability / 10, compute_capability % 10));
  if (!op.trans_b || op.trans_a)
    return Status::Unimplemented(
        "cuda: FP8 GEMM takes cuBLASLt's TN layout only: row-major A (ta=n) times B stored "
        "transposed (tb=t)");
  if (op.m % 16 || op.n % 16 || op.k % 16)
    return Status::Unimplemented("cuda: FP8 GEMM needs m, n and k multiples of 16");
  if (op.heads > 1) return Status::Unimplemented("cuda: no head-interleaved FP8 GEMM");
  return Status::Ok();
}

Status epilogue_operand(const GemmOp& op, LtEpilogue epilogue, OperandSpec* out) {
  if (op.batch != 1 || op.heads != 1)
    return Status::Unimplemented("cuda: GEMM epilogues here are for single, unbatched GEMMs");
  const bool bias = epilogue == LtEpilogue::bias;
  const DType dtype = bias ? storage_dtype(op.c_type) : DType::f32;
  const std::int64_t length = bias ? op.n : op.m;
  *out = OperandSpec{};
  out->name = bias ? "bias" : "diff_bias";
  out->dtype = dtype;
  out->dims = {length};
  out->bytes = static_cast<std::size_t>(length) * dtype_size(dtype);
  out->is_output = !bias;
  return Status::Ok();
}

Status plan_cublaslt_gemm(cublasLtHandle_t handle, const GemmOp& op, std::unique_ptr<Plan>* out,
                          int compute_capability, LtEpilogue epilogue) {
  const DType in = op.a_type;
  const bool inputs_ok =
      in == op.b_type && (in == DType::f32 || in == DType::tf32 || in == DType::bf16 ||
                          in == DType::f16 || in == DType::f8_e4m3);
  if (!inputs_ok)
    return Status::Unimplemented(
        fmt::format("cuda: no GEMM of {} by {}", dtype_name(in), dtype_name(op.b_type)));
  if (in == DType::f8_e4m3) TB_RETURN_IF_ERROR(fp8_supported(op, compute_capability));
  // Outputs: f32 always; bf16 / f16 inputs also their own dtype; FP8 inputs bf16 or f16.
  const bool half_out = op.c_type == DType::bf16 || op.c_type == DType::f16;
  const bool output_ok = storage_dtype(op.c_type) == DType::f32 ||
                         (in == DType::f8_e4m3 ? half_out : half_out && op.c_type == in);
  if (!output_ok)
    return Status::Unimplemented(
        fmt::format("cuda: {} inputs with a {} output", dtype_name(in), dtype_name(op.c_type)));
  if (op.prepacked_b) return Status::Unimplemented("cuda: no pre-packed layout in cuBLASLt");
  if (epilogue != LtEpilogue::none && in == DType::f8_e4m3)
    return Status::Unimplemented("cuda: no FP8 GEMM with a bias epilogue");
  auto plan = std::make_unique<LtGemmPlan>(handle, op, epilogue);
  TB_RETURN_IF_ERROR(plan->init());
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace tb::cuda
