#include "backends/openblas/openblas_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu_kernels/fully_connected_gemm.h"
#include "backends/cpu_kernels/im2col.h"
#include "backends/cpu_kernels/training_ops.h"
#include "backends/operands.h"
#include "backends/overloaded.h"

namespace tb {
namespace {

std::string parallel_mode() {
  switch (openblas_get_parallel()) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "OpenMP";
    default:
      return "unknown";
  }
}

// OpenBLAS takes sizes and leading dimensions as blasint (32 bits in Debian's builds): a larger
// one would be truncated, so it is unimplemented here, named.
Status fits_blasint(std::initializer_list<std::pair<const char*, std::int64_t>> sizes) {
  for (const auto& [name, size] : sizes)
    if (size > std::numeric_limits<blasint>::max())
      return Status::Unimplemented(
          fmt::format("cpu-openblas: {} = {} exceeds OpenBLAS's {}-bit integer (blasint)", name,
                      size, 8 * sizeof(blasint)));
  return Status::Ok();
}

std::string kernel_description() {
  return fmt::format("{} kernels", openblas_get_corename());
}

// Row-major GEMM, strided over `batch`, through cblas_sgemm or cblas_sbgemm.
class GemmPlan final : public cpu::CpuPlan {
 public:
  explicit GemmPlan(const GemmOp& op) : op_(op) {
    operands_ = gemm_operands(op);
    implementation_ = fmt::format("cblas_{}gemm, {}", op.a_type == DType::bf16 ? "sb" : "s",
                                  kernel_description());
    math_mode_ = op.a_type == DType::bf16 ? "bf16 inputs, fp32 accumulation" : "strict";
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    const auto ta = op_.trans_a ? CblasTrans : CblasNoTrans,
               tb = op_.trans_b ? CblasTrans : CblasNoTrans;
    const blasint m = static_cast<blasint>(op_.m), n = static_cast<blasint>(op_.n),
                  k = static_cast<blasint>(op_.k);
    const GemmOperandLayout la = gemm_layout(op_, GemmOperand::a),
                            lb = gemm_layout(op_, GemmOperand::b),
                            lc = gemm_layout(op_, GemmOperand::c);
    const BoundOperands bound(operands_, operands);
    const void *a = bound.buffer("a").data, *b = bound.buffer("b").data;
    float* c = bound.out<float>("c");
    for (std::int64_t batch = 0; batch < op_.batch; ++batch)
      for (std::int64_t head = 0; head < op_.heads; ++head) {
        float* c_at = c + batch * lc.batch + head * lc.head;
        const std::int64_t a_at = batch * la.batch + head * la.head,
                           b_at = batch * lb.batch + head * lb.head;
        if (op_.a_type == DType::bf16) {
#ifdef TRAINBENCH_OPENBLAS_HAS_SBGEMM
          cblas_sbgemm(CblasRowMajor, ta, tb, m, n, k, op_.alpha,
                       static_cast<const bfloat16*>(a) + a_at, la.ld,
                       static_cast<const bfloat16*>(b) + b_at, lb.ld, op_.beta, c_at, lc.ld);
#endif
        } else {
          cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, op_.alpha,
                      static_cast<const float*>(a) + a_at, la.ld,
                      static_cast<const float*>(b) + b_at, lb.ld, op_.beta, c_at, lc.ld);
        }
      }
    return Status::Ok();
  }

 private:
  GemmOp op_;
};

// Convolution as one sgemm per image: W (oc x ic*kh*kw) times the image's column matrix
// (ic*kh*kw x oh*ow). The column matrix is the workspace, planned once; im2col / col2im are
// the shared kernels at the level chosen when the plan is made.
class ConvPlan final : public cpu::CpuPlan {
 public:
  ConvPlan(const ConvOp& op, const cpu::CpuKernels* kernels) : op_(op), kernels_(kernels) {
    operands_ = conv_operands(op);
    identity_ = cpu::im2col_is_identity(op);
    workspace_bytes_ =
        identity_ ? 0 : static_cast<std::size_t>(patch_size() * pixels()) * sizeof(float);
    implementation_ =
        fmt::format("{}cblas_sgemm per image{}, {}",
                    identity_ ? "" : fmt::format("im2col ({}) + ", cpu::isa_name(kernels->isa)),
                    op.epilogue == ConvEpilogue::bias_relu ? " + bias and ReLU while in cache"
                    : op.epilogue == ConvEpilogue::bias    ? " + bias while in cache"
                                                           : "",
                    kernel_description());
  }

  Status run(std::span<const Buffer> operands, Buffer workspace) override {
    const BoundOperands bound(operands_, operands);
    // Each direction reads two of these and writes `out`.
    const float *src = bound.in_if<float>("src"), *weights = bound.in_if<float>("weights"),
                *diff_dst = bound.in_if<float>("diff_dst"), *bias = bound.in_if<float>("bias");
    float* out = bound.out<float>(op_.direction == ConvDirection::forward         ? "dst"
                                  : op_.direction == ConvDirection::backward_data ? "diff_src"
                                                                                  : "diff_weights");
    float* col = static_cast<float*>(workspace.data);
    const blasint oc = static_cast<blasint>(op_.oc), patch = static_cast<blasint>(patch_size()),
                  pixels = static_cast<blasint>(this->pixels());
    const std::int64_t src_image = op_.ic * op_.ih * op_.iw, dst_image = op_.oc * pixels;
    for (std::int64_t n = 0; n < op_.mb; ++n) {
      switch (op_.direction) {
        case ConvDirection::forward: {  // dst_n = W x col(src_n)
          const float* columns = columns_of(src + n * src_image, col);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, oc, pixels, patch, 1.0f, weights,
                      patch, columns, pixels, 0.0f, out + n * dst_image, pixels);
          if (bias) add_bias(bias, out + n * dst_image);
          break;
        }
        case ConvDirection::backward_data: {  // diff_src_n = col2im(W^T x diff_dst_n)
          float* image = out + n * src_image;
          float* columns = identity_ ? image : col;
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, pixels, oc, 1.0f, weights,
                      patch, diff_dst + n * dst_image, pixels, 0.0f, columns, pixels);
          if (!identity_) {
            std::memset(image, 0, static_cast<std::size_t>(src_image) * sizeof(float));
            cpu::col2im(*kernels_, op_, columns, image);
          }
          break;
        }
        case ConvDirection::backward_weights: {  // diff_W += diff_dst_n x col(src_n)^T
          const float* columns = columns_of(src + n * src_image, col);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, oc, patch, pixels, 1.0f,
                      diff_dst + n * dst_image, pixels, columns, pixels, n == 0 ? 0.0f : 1.0f, out,
                      patch);
          break;
        }
      }
    }
    return Status::Ok();
  }

 private:
  std::int64_t patch_size() const { return op_.ic * op_.kh * op_.kw; }
  std::int64_t pixels() const { return op_.oh() * op_.ow(); }
  // OpenBLAS has no epilogue: the image's output gets its bias (and ReLU) right after its
  // GEMM, while it is still in cache.
  void add_bias(const float* bias, float* image) const {
    const std::int64_t count = pixels();
    const bool relu = op_.epilogue == ConvEpilogue::bias_relu;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < op_.oc; ++c) {
      float* plane = image + c * count;
      for (std::int64_t i = 0; i < count; ++i) {
        const float value = plane[i] + bias[c];
        plane[i] = relu ? std::max(value, 0.0f) : value;
      }
    }
  }
  const float* columns_of(const float* image, float* col) const {
    if (identity_) return image;
    cpu::im2col(*kernels_, op_, image, col);
    return col;
  }

  ConvOp op_;
  const cpu::CpuKernels* kernels_;
  bool identity_ = false;
};

// Fully connected layer as sgemm: y = x W^T + b, dx = dy W, dW = dy^T x, db = column sums of dy.
bool row_major_sgemm(char trans_a, char trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                     float alpha, const float* a, std::int64_t lda, const float* b,
                     std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  auto trans = [](char t) { return t == 'T' ? CblasTrans : CblasNoTrans; };
  cblas_sgemm(CblasRowMajor, trans(trans_a), trans(trans_b), static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  return true;
}

class FullyConnectedPlan final : public cpu::CpuPlan {
 public:
  explicit FullyConnectedPlan(const FullyConnectedOp& op) : op_(op) {
    operands_ = fully_connected_operands(op);
    implementation_ = fmt::format("cblas_sgemm, {}", kernel_description());
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    return cpu::fully_connected_with_gemm(op_, BoundOperands(operands_, operands),
                                          &row_major_sgemm);
  }

 private:
  FullyConnectedOp op_;
};

class OpenBlasBackend final : public cpu::CpuBackend {
 public:
  explicit OpenBlasBackend(const BackendConfig& config) : CpuBackend("cpu-openblas", config) {
    openblas_set_num_threads(placement().threads);
  }

  DeviceInfo device_info() const override {
    DeviceInfo info = CpuBackend::device_info();
    info.libraries.push_back({"OpenBLAS", openblas_get_config()});
    info.details["openblas_corename"] = openblas_get_corename();  // the kernel set that really runs
    info.details["openblas_config"] = openblas_get_config();
    info.details["openblas_parallel"] = parallel_mode();
    info.details["openblas_threads"] = openblas_get_num_threads();
#ifdef TRAINBENCH_OPENBLAS_HAS_SBGEMM
    info.details["openblas_sbgemm"] = true;
#else
    info.details["openblas_sbgemm"] = false;
#endif
    return info;
  }

  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    // f64 ops are the shared double-precision reference.
    if (data_type(op) == DType::f64) return CpuBackend::plan(op, out);
    return std::visit(
        Overloaded{[&](const GemmOp& gemm) { return plan_gemm(gemm, out); },
                   [&](const ConvOp& conv) { return plan_conv(conv, out); },
                   [&](const FullyConnectedOp& fc) { return plan_fully_connected(fc, out); },
                   // Batch norm, pooling, ReLU, add, loss and optimizer: the shared CPU code.
                   [&](const auto&) { return CpuBackend::plan(op, out); }},
        op);
  }

 private:
  static Status plan_fully_connected(const FullyConnectedOp& op, std::unique_ptr<Plan>* out) {
    if (op.dtype != DType::f32)
      return Status::Unimplemented("cpu-openblas: the fully connected layer is fp32 only")
          .because(ReasonCode::dtype_unsupported);
    TB_RETURN_IF_ERROR(fits_blasint({{"mb", op.mb}, {"in", op.in}, {"out", op.out}}));
    *out = std::make_unique<FullyConnectedPlan>(op);
    return Status::Ok();
  }
  static Status plan_gemm(const GemmOp& op, std::unique_ptr<Plan>* out) {
    if (op.a_type != op.b_type || op.c_type != DType::f32)
      return Status::Unimplemented("cpu-openblas: GEMM needs equal input dtypes and an f32 output")
          .because(ReasonCode::dtype_unsupported);
    if (op.a_type == DType::bf16) {
#ifndef TRAINBENCH_OPENBLAS_HAS_SBGEMM
      return Status::Unimplemented(
                 "cpu-openblas: this OpenBLAS does not export cblas_sbgemm (no bf16 GEMM)")
          .because(ReasonCode::dtype_unsupported);
#endif
    } else if (op.a_type != DType::f32) {
      return Status::Unimplemented(
                 fmt::format("cpu-openblas has no {} GEMM", dtype_name(op.a_type)))
          .because(ReasonCode::dtype_unsupported);
    }
    if (op.prepacked_b)
      return Status::Unimplemented("cpu-openblas: OpenBLAS has no pre-packed GEMM interface");
    TB_RETURN_IF_ERROR(fits_blasint({{"m", op.m},
                                     {"n", op.n},
                                     {"k", op.k},
                                     {"lda", gemm_layout(op, GemmOperand::a).ld},
                                     {"ldb", gemm_layout(op, GemmOperand::b).ld},
                                     {"ldc", gemm_layout(op, GemmOperand::c).ld}}));
    *out = std::make_unique<GemmPlan>(op);
    return Status::Ok();
  }

  static Status plan_conv(const ConvOp& op, std::unique_ptr<Plan>* out) {
    if (op.epilogue != ConvEpilogue::none && op.direction != ConvDirection::forward)
      return Status::InvalidArgument("a convolution epilogue is for the forward direction");
    if (op.dtype != DType::f32)
      return Status::Unimplemented(
                 fmt::format("cpu-openblas: the im2col convolution is fp32 only, not {}",
                             dtype_name(op.dtype)))
          .because(ReasonCode::dtype_unsupported);
    TB_RETURN_IF_ERROR(fits_blasint(
        {{"oc", op.oc}, {"ic x kh x kw", op.ic * op.kh * op.kw}, {"oh x ow", op.oh() * op.ow()}}));
    const cpu::CpuKernels* kernels = nullptr;
    if (Status status = cpu::kernels_from_environment(&kernels); !status.ok()) return status;
    *out = std::make_unique<ConvPlan>(op, kernels);
    return Status::Ok();
  }
};

}  // namespace

BackendEntry openblas_backend_entry() {
  std::string version = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  version.erase(0, version.find_first_not_of(' '));
  version.erase(version.find_last_not_of(' ') + 1);
  return {"cpu-openblas",
          fmt::format("CPU through {} ({} threads; sgemm, im2col convolution)", version,
                      parallel_mode()),
          [] {
            return Availability{true, ""};
          },
          [](const BackendConfig& config, std::unique_ptr<Backend>* out) {
            *out = std::make_unique<OpenBlasBackend>(config);
            return Status::Ok();
          }};
}

}  // namespace tb
