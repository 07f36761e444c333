// The op set: what ResNet-50 and BERT training need, nothing more. Each op is a plain
// descriptor; a backend plans it once and executes the plan many times. Every descriptor
// names itself (kName) and a product counts its own work (multiply_adds() or flops()): the
// functions over OpDesc below read them, so an op without them does not compile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "backends/op_basics.h"
#include "backends/ops/rms_norm.h"

namespace tb {

// C = alpha * op(A) * op(B) + beta * C, row-major; op(A) is m x k, op(B) is k x n.
// a_type / b_type are the input dtypes, c_type the output; accumulation is fp32 (fp64 for f64).
struct GemmOp {
  static constexpr std::string_view kName = "gemm";
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  DType a_type = DType::f32, b_type = DType::f32, c_type = DType::f32;
  std::int64_t batch = 1;    // strided-batched when > 1 (attention)
  bool prepacked_b = false;  // B reordered once into the layout the library prefers
  // FP8 only: Tensor Core accumulation without periodic promotion to fp32 (faster, fewer
  // bits; what the datasheet rate assumes). cuBLASLt's default is off.
  bool fast_accumulation = false;
  // Attention: `heads` GEMMs per batch entry. An interleaved operand is stored as a linear
  // layer writes it, [batch, rows, heads, cols] (rows, cols of the stored matrix), instead of
  // [batch, heads, rows, cols]: queries, keys, values and the attention output need no
  // transposing copies.
  std::int64_t heads = 1;
  bool a_interleaved = false, b_interleaved = false, c_interleaved = false;
  std::int64_t multiply_adds() const { return batch * heads * m * n * k; }
#if __cplusplus >= 202002L  // host code: the CUDA sources are C++17
  bool operator==(const GemmOp&) const = default;
#endif
};

// Where element (batch, head, row, col) of a GEMM operand's logical matrix (op(A): m x k,
// op(B): k x n, C: m x n) lives, as strides in elements; `ld` is the stored row-major
// matrix's leading dimension, as BLAS takes it.
struct GemmOperandLayout {
  std::int64_t batch = 0, head = 0, row = 0, col = 0, ld = 0;
};
enum class GemmOperand { a, b, c };
GemmOperandLayout gemm_layout(const GemmOp& op, GemmOperand which);

// How a 4-D activation (logical NCHW) lies in memory. `any`: the plan picks per op and callers
// exchange plain data through import / export (single-op benchmarks). `plain`: NCHW. `native`:
// the backend's fastest layout for the dtype and channel count, the same for every op of a
// backend, so a network's ops chain without reorders. With `plain` or `native` the weights
// are exchanged plain (OIHW, [out, in]); a plan that wants them blocked reorders them itself.
enum class Layout { any, plain, native };

enum class ConvDirection { forward, backward_data, backward_weights };

// What a forward convolution applies to its output in the same pass, as an inference-style
// layer does (a training step's convolutions have none: batch norm follows each): a bias per
// output channel, or the bias and then ReLU. With one, the forward's operands are src,
// weights, bias [oc], dst.
enum class ConvEpilogue { none, bias, bias_relu };

// 2-D convolution, NCHW semantics; the backend picks the memory layout.
struct ConvOp {
  static constexpr std::string_view kName = "conv";
  ConvDirection direction = ConvDirection::forward;
  ConvEpilogue epilogue = ConvEpilogue::none;  // forward only
  std::int64_t mb = 1, ic = 1, ih = 1, iw = 1, oc = 1, kh = 1, kw = 1;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0;
  DType dtype = DType::f32;
  Layout layout = Layout::any;
  // Let the library pick Winograd where it judges it faster (fewer multiplies for 3x3 stride
  // 1; slightly larger rounding error). FLOPs are still counted as for direct convolution.
  bool winograd_allowed = false;
  // A plan no timed run uses (a validation-only network's): the library's first suitable engine,
  // untimed, where a GPU library would otherwise time its candidates for the fastest.
  bool first_engine = false;
  std::int64_t oh() const { return (ih + 2 * ph - kh) / sh + 1; }
  std::int64_t ow() const { return (iw + 2 * pw - kw) / sw + 1; }
  // Every direction does the forward's work.
  std::int64_t multiply_adds() const { return mb * oc * oh() * ow() * ic * kh * kw; }
#if __cplusplus >= 202002L  // host code: the CUDA sources are C++17
  bool operator==(const ConvOp&) const = default;
#endif
};

enum class StreamKernel { copy, scale, add, triad, dot };

// STREAM kernels over fp64 arrays a, b, c of n elements (dot writes one fp64 result).
struct StreamOp {
  static constexpr std::string_view kName = "stream";
  StreamKernel kernel = StreamKernel::triad;
  std::int64_t n = 0;
  double scalar = 3.0;
};

enum class TransferDirection { host_to_device, device_to_host, device_to_device };

// Copies `bytes` between memories: operand 0 is the source, operand 1 the destination; the
// host side is pinned or pageable.
struct TransferOp {
  static constexpr std::string_view kName = "transfer";
  TransferDirection direction = TransferDirection::host_to_device;
  std::int64_t bytes = 0;
  bool pinned = true;
};

// Peak arithmetic probe: every thread runs `iterations` rounds of independent FMA chains
// (fp32) or bf16 dot products (bf16) in registers; operand 0 receives per-thread results.
struct PeakOp {
  static constexpr std::string_view kName = "peak";
  DType dtype = DType::f32;
  std::int64_t iterations = 1 << 16;
};
// The probe validates itself: every chain adds kPeakIncrement per product per iteration
// (fp32: acc = acc * 1 + inc; bf16: acc += 1 * inc + 1 * inc), so each worker's mean lane
// value is exactly iterations * peak_increment_per_iteration(dtype).
inline constexpr double kPeakIncrement = 1.0 / 4096;
inline constexpr std::int64_t kPeakMaxIterations = std::int64_t{1} << 22;  // stays exact in fp32
constexpr double peak_increment_per_iteration(DType dtype) {
  return dtype == DType::bf16 ? 2 * kPeakIncrement : kPeakIncrement;
}

// --- Training ops. A backend that lacks one answers Unimplemented. ---

// Training-mode batch normalization over N, H, W per channel.
// forward:  src, gamma, beta -> dst, mean, variance (biased, of this batch); running_mean and
//           running_var updated in place (PyTorch's rule: unbiased variance, `momentum` weight);
//           with fuse_relu, dst = relu(bn(src)) and relu_mask records where it was positive.
// backward: src, diff_dst, gamma, beta, mean, variance[, relu_mask] -> diff_src, diff_gamma,
//           diff_beta.
// inference (evaluation, forward only): src, gamma, beta, running_mean, running_var -> dst,
//           normalized with the running statistics, nothing updated (fuse_relu: no mask).
struct BatchNormOp {
  static constexpr std::string_view kName = "batch_norm";
  Pass pass = Pass::forward;
  bool inference = false;
  std::int64_t mb = 1, channels = 1, h = 1, w = 1;
  float epsilon = 1e-5f, momentum = 0.1f;
  bool fuse_relu = false;
  DType dtype = DType::f32;
  Layout layout = Layout::native;
};

// Element-wise over `count` values in whatever layout the operands share.
// relu forward: src -> dst; backward: dst, diff_dst -> diff_src (the mask is taken from dst).
// gelu (exact, erf: BERT's): forward src -> dst; backward: src, diff_dst -> diff_src.
// tanh (BERT's pooler): as relu, the gradient from dst (1 - dst^2).
enum class EltwiseKind { relu, gelu, tanh };
struct EltwiseOp {
  static constexpr std::string_view kName = "eltwise";
  EltwiseKind kind = EltwiseKind::relu;
  Pass pass = Pass::forward;
  std::int64_t count = 0;
  DType dtype = DType::f32;
};

// forward max: src -> dst, indices (what backward needs); backward: diff_dst, indices -> diff_src.
// global_average: kernel = the whole image; forward src -> dst [mb, C, 1, 1], backward
// diff_dst -> diff_src.
enum class PoolKind { max, global_average };
struct PoolOp {
  static constexpr std::string_view kName = "pool";
  PoolKind kind = PoolKind::max;
  Pass pass = Pass::forward;
  std::int64_t mb = 1, channels = 1, ih = 1, iw = 1, kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  DType dtype = DType::f32;
  Layout layout = Layout::native;
  std::int64_t oh() const { return (ih + 2 * ph - kh) / sh + 1; }
  std::int64_t ow() const { return (iw + 2 * pw - kw) / sw + 1; }
};

// dst = src0 + src1 over `count` values sharing one layout; with fuse_relu, dst = relu(sum).
enum class BinaryKind { add };
struct BinaryOp {
  static constexpr std::string_view kName = "binary";
  BinaryKind kind = BinaryKind::add;
  std::int64_t count = 0;
  bool fuse_relu = false;
  DType dtype = DType::f32;
};

// Fully connected layer, y = x W^T + b with x [mb, in], W [out, in], b [out].
// forward: src, weights, bias -> dst; backward_data: diff_dst, weights -> diff_src;
// backward_weights: src, diff_dst -> diff_weights, diff_bias.
struct FullyConnectedOp {
  static constexpr std::string_view kName = "fully_connected";
  ConvDirection direction = ConvDirection::forward;
  std::int64_t mb = 1, in = 1, out = 1;
  DType dtype = DType::f32;
  std::int64_t multiply_adds() const { return mb * in * out; }
#if __cplusplus >= 202002L  // host code: the CUDA sources are C++17
  bool operator==(const FullyConnectedOp&) const = default;
#endif
};

// The GEMM a fully connected layer's direction is on its row-major operands (forward: src times
// weights transposed; backward-data: diff_dst times weights; backward-weights: diff_dst
// transposed times src, into fp32). The bias and its gradient are not part of it.
GemmOp fully_connected_gemm(const FullyConnectedOp& op);

// Row softmax of scale * src + mask, as attention uses it: `mask` (f32, additive: 0 to keep,
// a large negative value to drop) has one row per `rows_per_mask` rows of src (one row of key
// positions per sequence, shared by its heads and queries).
// forward: src[, mask] -> dst; backward: dst, diff_dst -> diff_src (the gradient of src).
struct SoftmaxOp {
  static constexpr std::string_view kName = "softmax";
  Pass pass = Pass::forward;
  std::int64_t rows = 0, cols = 0;
  float scale = 1.0f;
  bool masked = false;
  std::int64_t rows_per_mask = 1;
  DType dtype = DType::f32;
};

// Mean softmax cross-entropy over `rows` samples, labels as i32 class indices.
// forward: logits, labels -> probabilities, loss (one value of the op's dtype);
// backward: probabilities, labels[, scale] -> diff_logits (for the mean loss; with `scaled`,
// multiplied by the loss scale, a host-side f32 that changes between steps).
struct SoftmaxCrossEntropyOp {
  static constexpr std::string_view kName = "softmax_cross_entropy";
  Pass pass = Pass::forward;
  std::int64_t rows = 0, classes = 0;
  DType dtype = DType::f32;
  bool scaled = false;  // backward: loss scaling (fp16 training)
};
// Layer normalization over each row's `cols` values (BERT's epsilon by default).
// forward: src, gamma, beta -> dst, mean, variance (per row, biased);
// backward: src, diff_dst, gamma, beta, mean, variance -> diff_src, diff_gamma, diff_beta
// (beta unused by the math; oneDNN's primitive takes it). gamma, beta and statistics are f32
// for low-precision data.
struct LayerNormOp {
  static constexpr std::string_view kName = "layer_norm";
  Pass pass = Pass::forward;
  std::int64_t rows = 0, cols = 0;
  float epsilon = 1e-12f;
  DType dtype = DType::f32;
};

// Gathers rows of a table by index: token embeddings, and the masked positions BERT's
// language-model head reads. forward: table[vocab, dim], ids[tokens] (i32) -> dst[tokens, dim];
// backward: diff_dst, ids -> diff_table, scatter-added (zeroed first unless `accumulate`:
// tied weights add a second gradient). A weight table's gradient is f32 for bf16 data (fp32
// master gradients); gathered activations (`weight_table` false) keep the data's dtype.
struct EmbeddingOp {
  static constexpr std::string_view kName = "embedding";
  Pass pass = Pass::forward;
  std::int64_t tokens = 0, vocab = 0, dim = 0;
  bool accumulate = false;
  bool weight_table = true;
  DType dtype = DType::f32;
};
// A weight table's gradient stays fp32 for bf16 data (fp32 master gradients); gathered
// activations keep their dtype.
inline DType embedding_table_grad_dtype(const EmbeddingOp& op) {
  return op.dtype == DType::bf16 && op.weight_table ? DType::f32 : op.dtype;
}
// Inverted dropout without a stored mask: element i of execution `step` is dropped when a
// counter-based hash of (seed, step, i) falls below `probability`, so backward regenerates
// forward's mask. forward: src, step (host, i32) -> dst = src * keep / (1 - p);
// backward: diff_dst, step -> diff_src = diff_dst * keep / (1 - p).
struct DropoutOp {
  static constexpr std::string_view kName = "dropout";
  Pass pass = Pass::forward;
  std::int64_t count = 0;
  float probability = 0.1f;
  std::uint64_t seed = 0;
  DType dtype = DType::f32;
};
struct CastOp {
  static constexpr std::string_view kName = "cast";
  std::int64_t count = 0;
  DType from = DType::f32, to = DType::bf16;
};

// One optimizer step over `count` parameters held in one flat buffer.
// sgd_momentum (PyTorch's SGD): g = grad + weight_decay * w; v = momentum * v + g; w -= lr * v.
// Operands: weights (updated), grads, momentum (updated), hyper (host memory, f32:
// learning_rate, momentum, weight_decay), since they change per step.
// adamw (PyTorch's AdamW): w -= lr * weight_decay * w; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// Operands: weights, grads, m, v (updated), hyper (host, f32: learning_rate, beta1, beta2,
// epsilon, weight_decay, step t >= 1).
// lamb (MLPerf BERT's optimizer, with bias correction): m, v as AdamW; per parameter tensor
// u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w, trust ratio r = |w| / |u| (1 when
// either is 0), w -= lr * r * u. Operands: weights, grads, m, v, tensor_offsets (i32, one
// more than the number of tensors: where each starts in the flat buffer, then the end),
// hyper (as AdamW).
enum class OptimizerKind { sgd_momentum, adamw, lamb };
struct OptimizerOp {
  static constexpr std::string_view kName = "optimizer";
  OptimizerKind kind = OptimizerKind::sgd_momentum;
  std::int64_t count = 0;
  std::int64_t tensors = 1;  // lamb: how many parameter tensors the flat buffer holds
  DType dtype = DType::f32;
};
inline constexpr int kSgdHyperCount = 3;
inline constexpr int kAdamHyperCount = 6;

// Loss scaling's unscale-and-check (PyTorch's GradScaler): grads *= inverse_scale (host, f32)
// in place over `count` values; found_nonfinite (i32, one value) = 1 when any of them is
// infinite or NaN, else 0. Operands: grads, inverse_scale, found_nonfinite.
struct UnscaleGradientsOp {
  static constexpr std::string_view kName = "unscale_gradients";
  std::int64_t count = 0;
  DType dtype = DType::f32;
};

// Fused multi-head attention (scaled dot-product, flash style: the S x S probabilities are
// never stored), per sequence b and head h: P = softmax(scale Q K^T) over the keys before
// key_lengths[b] (the rest get probability 0, as BERT's padding mask), O = P V. Queries, keys,
// values and the output are head-interleaved as linear layers write them: [batch, sequence,
// heads, head_dim]. No dropout on P. forward: q, k, v, key_lengths (i32 [batch]) -> out, stats
// (per row the log-sum-exp of its scaled scores, [batch, heads, sequence], f32; f64 in f64);
// backward: q, k, v, key_lengths, out, stats, diff_out -> diff_q, diff_k, diff_v.
struct AttentionOp {
  static constexpr std::string_view kName = "attention";
  Pass pass = Pass::forward;
  std::int64_t batch = 1, heads = 1, sequence = 1, head_dim = 1;
  float scale = 1.0f;
  DType dtype = DType::f32;
  // Q K^T and P V; backward four (the recomputed scores are not counted, as for the model).
  double flops() const {
    const double one = 2.0 * static_cast<double>(batch * heads) *
                       static_cast<double>(sequence * sequence) * static_cast<double>(head_dim);
    return pass == Pass::forward ? 2 * one : 4 * one;
  }
#if __cplusplus >= 202002L  // host code: the CUDA sources are C++17
  bool operator==(const AttentionOp&) const = default;
#endif
};

using OpDesc = std::variant<GemmOp, ConvOp, StreamOp, PeakOp, TransferOp, BatchNormOp, EltwiseOp,
                            PoolOp, BinaryOp, FullyConnectedOp, SoftmaxOp, SoftmaxCrossEntropyOp,
                            LayerNormOp, EmbeddingOp, DropoutOp, CastOp, OptimizerOp,
                            UnscaleGradientsOp, AttentionOp, RmsNormOp>;

// The dtype an op's data is in, for ops that have one field for it (GEMM: its inputs').
std::optional<DType> data_type(const OpDesc& op);

// Short name of the op kind (its kName: "gemm", "conv", ...), for messages.
std::string_view op_name(const OpDesc& op);

// Products are the ops whose descriptor counts their work: a linear product (GEMM, convolution
// in any direction, fully connected: a sum of products, linear in each input) says its
// multiply_adds(); fused attention its flops().
// Whether the op is a linear product: the forward error bound of a sum applies to it.
bool is_linear_product(const OpDesc& op);
// A linear product's multiply-adds, 0 for other ops.
std::int64_t multiply_adds(const OpDesc& op);
// Floating-point operations of one execution of a product op, a multiply-add counting 2; 0
// for other ops.
double product_flops(const OpDesc& op);

}  // namespace tb
