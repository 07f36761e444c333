#include "backends/reference/reference_products.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu_kernels/kernel_plan.h"
#include "backends/cpu_kernels/training_ops.h"
#include "backends/operands.h"
#include "backends/product_reference.h"

namespace tb::cpu {
namespace {

// --- fused attention, f64 only: the reference for the libraries' fused kernels ---

// Element (b, s, h, d) of a head-interleaved [batch, sequence, heads, head_dim] tensor.
struct InterleavedRows {
  const AttentionOp& op;
  Index at(Index b, Index s, Index h) const {
    return ((b * op.sequence + s) * op.heads + h) * op.head_dim;
  }
  double dot(const double* x, const double* y) const {
    double sum = 0;
    for (Index d = 0; d < op.head_dim; ++d) sum += x[d] * y[d];
    return sum;
  }
};

Index key_length(const AttentionOp& op, const std::int32_t* lengths, Index b) {
  return std::clamp<Index>(lengths[b], 0, op.sequence);
}

void attention_forward(const AttentionOp& op, const BoundOperands& b) {
  const double *q = b.in<double>("q"), *k = b.in<double>("k"), *v = b.in<double>("v");
  const std::int32_t* lengths = b.in<std::int32_t>("key_lengths");
  double *out = b.out<double>("out"), *stats = b.out<double>("stats");
  const InterleavedRows rows{op};
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < op.batch; ++n)
    for (Index h = 0; h < op.heads; ++h) {
      const Index keys = key_length(op, lengths, n);
      std::vector<double> scores(static_cast<std::size_t>(keys));
      for (Index i = 0; i < op.sequence; ++i) {
        const double* query = q + rows.at(n, i, h);
        double top = -INFINITY;
        for (Index j = 0; j < keys; ++j) {
          scores[j] = op.scale * rows.dot(query, k + rows.at(n, j, h));
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (Index j = 0; j < keys; ++j) sum += std::exp(scores[j] - top);
        const double log_sum_exp = top + std::log(sum);
        stats[(n * op.heads + h) * op.sequence + i] = log_sum_exp;
        double* o = out + rows.at(n, i, h);
        std::fill(o, o + op.head_dim, 0.0);
        for (Index j = 0; j < keys; ++j) {
          const double p = std::exp(scores[j] - log_sum_exp);
          const double* value = v + rows.at(n, j, h);
          for (Index d = 0; d < op.head_dim; ++d) o[d] += p * value[d];
        }
      }
    }
}

// From the forward's log-sum-exp, as flash attention's backward: P = exp(scale Q K^T - stats),
// dP = dO V^T, dS = P (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
void attention_backward(const AttentionOp& op, const BoundOperands& b) {
  const double *q = b.in<double>("q"), *k = b.in<double>("k"), *v = b.in<double>("v");
  const std::int32_t* lengths = b.in<std::int32_t>("key_lengths");
  const double *out = b.in<double>("out"), *stats = b.in<double>("stats"),
               *diff_out = b.in<double>("diff_out");
  double *diff_q = b.out<double>("diff_q"), *diff_k = b.out<double>("diff_k"),
         *diff_v = b.out<double>("diff_v");
  const InterleavedRows rows{op};
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < op.batch; ++n)
    for (Index h = 0; h < op.heads; ++h) {
      for (Index i = 0; i < op.sequence; ++i)
        for (double* grad : {diff_q, diff_k, diff_v})
          std::fill(grad + rows.at(n, i, h), grad + rows.at(n, i, h) + op.head_dim, 0.0);
      const Index keys = key_length(op, lengths, n);
      for (Index i = 0; i < op.sequence; ++i) {
        const Index row = rows.at(n, i, h);
        const double delta = rows.dot(diff_out + row, out + row);
        const double log_sum_exp = stats[(n * op.heads + h) * op.sequence + i];
        for (Index j = 0; j < keys; ++j) {
          const Index key = rows.at(n, j, h);
          const double p = std::exp(op.scale * rows.dot(q + row, k + key) - log_sum_exp);
          const double dp = rows.dot(diff_out + row, v + key);
          const double ds = op.scale * p * (dp - delta);
          for (Index d = 0; d < op.head_dim; ++d) {
            diff_q[row + d] += ds * k[key + d];
            diff_k[key + d] += ds * q[row + d];
            diff_v[key + d] += p * diff_out[row + d];
          }
        }
      }
    }
}

// --- convolution, fully connected and GEMM, f64 reference: each output element from
// backends/product_reference.h, the loops workload validation and the op check also use ---

// Every element (i, j, k, l) of a row-major [d0, d1, d2, d3] output, the first two dimensions
// shared among the threads.
template <typename Element>
void fill_4d(double* out, const std::array<Index, 4>& d, Element element) {
#pragma omp parallel for collapse(2) schedule(static)
  for (Index i = 0; i < d[0]; ++i)
    for (Index j = 0; j < d[1]; ++j)
      for (Index k = 0; k < d[2]; ++k)
        for (Index l = 0; l < d[3]; ++l)
          out[((i * d[1] + j) * d[2] + k) * d[3] + l] = element(i, j, k, l);
}

void conv_forward(const ConvOp& op, const BoundOperands& b) {
  const double *src = b.in<double>("src"), *weights = b.in<double>("weights");
  const double* bias = b.in_if<double>("bias");
  fill_4d(b.out<double>("dst"), {op.mb, op.oc, op.oh(), op.ow()},
          [&](Index n, Index oc, Index y, Index x) {
            reference::ProductSum sum =
                reference::conv_forward_element(op, src, weights, n, oc, y, x);
            if (bias) reference::add_bias(sum, bias[oc], op.epilogue == ConvEpilogue::bias_relu);
            return sum.value;
          });
}

void conv_backward_data(const ConvOp& op, const BoundOperands& b) {
  const double *diff_dst = b.in<double>("diff_dst"), *weights = b.in<double>("weights");
  fill_4d(b.out<double>("diff_src"), {op.mb, op.ic, op.ih, op.iw},
          [&](Index n, Index ic, Index y, Index x) {
            return reference::conv_backward_data_element(op, diff_dst, weights, n, ic, y, x).value;
          });
}

void conv_backward_weights(const ConvOp& op, const BoundOperands& b) {
  const double *src = b.in<double>("src"), *diff_dst = b.in<double>("diff_dst");
  fill_4d(
      b.out<double>("diff_weights"), {op.oc, op.ic, op.kh, op.kw},
      [&](Index oc, Index ic, Index ky, Index kx) {
        return reference::conv_backward_weights_element(op, src, diff_dst, oc, ic, ky, kx).value;
      });
}

void fully_connected(const FullyConnectedOp& op, const BoundOperands& b) {
  switch (op.direction) {
    case ConvDirection::forward: {
      const double *src = b.in<double>("src"), *weights = b.in<double>("weights"),
                   *bias = b.in<double>("bias");
      double* dst = b.out<double>("dst");
#pragma omp parallel for collapse(2) schedule(static)
      for (Index n = 0; n < op.mb; ++n)
        for (Index o = 0; o < op.out; ++o) {
          reference::ProductSum sum = reference::fully_connected_element(op, src, weights, n, o);
          reference::add_bias(sum, bias[o], false);
          dst[n * op.out + o] = sum.value;
        }
      return;
    }
    case ConvDirection::backward_data: {
      const double *diff_dst = b.in<double>("diff_dst"), *weights = b.in<double>("weights");
      double* diff_src = b.out<double>("diff_src");
#pragma omp parallel for collapse(2) schedule(static)
      for (Index n = 0; n < op.mb; ++n)
        for (Index i = 0; i < op.in; ++i)
          diff_src[n * op.in + i] =
              reference::fully_connected_element(op, diff_dst, weights, n, i).value;
      return;
    }
    case ConvDirection::backward_weights: {
      const double *src = b.in<double>("src"), *diff_dst = b.in<double>("diff_dst");
      double *diff_weights = b.out<double>("diff_weights"), *diff_bias = b.out<double>("diff_bias");
#pragma omp parallel for schedule(static)
      for (Index o = 0; o < op.out; ++o) {
        diff_bias[o] = reference::fully_connected_bias_gradient_element(op, diff_dst, o).value;
        for (Index i = 0; i < op.in; ++i)
          diff_weights[o * op.in + i] =
              reference::fully_connected_element(op, diff_dst, src, o, i).value;
      }
      return;
    }
  }
}

// Strided-batched GEMM over batch and heads: C = alpha op(A) op(B) + beta C.
void gemm(const GemmOp& op, const BoundOperands& b) {
  const double *a = b.in<double>("a"), *bm = b.in<double>("b");
  double* c = b.out<double>("c");
  const GemmOperandLayout lc = gemm_layout(op, GemmOperand::c);
#pragma omp parallel for collapse(3) schedule(static)
  for (Index batch = 0; batch < op.batch; ++batch)
    for (Index head = 0; head < op.heads; ++head)
      for (Index i = 0; i < op.m; ++i)
        for (Index j = 0; j < op.n; ++j) {
          double& out = c[batch * lc.batch + head * lc.head + i * lc.row + j * lc.col];
          out = reference::gemm_element(op, a, bm, batch, head, i, j).value +
                (op.beta != 0 ? op.beta * out : 0.0);
        }
}

Status plan_product(const AttentionOp& o, std::unique_ptr<Plan>* out) {
  if (o.dtype != DType::f64)
    return Status::Unimplemented(
        "no fused attention on the CPU: oneDNN 2.6 has no scaled dot-product attention "
        "primitive and OpenBLAS none (the shared CPU code holds the f64 reference only)");
  if (o.batch < 1 || o.heads < 1 || o.sequence < 1 || o.head_dim < 1)
    return Status::InvalidArgument("attention: batch, heads, sequence and head_dim must be >= 1");
  return make_plan(
      o.dtype, attention_operands(o), "fused attention", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        if constexpr (std::is_same_v<T, double>)
          o.pass == Pass::forward ? attention_forward(o, b) : attention_backward(o, b);
      },
      out);
}

Status plan_product(const GemmOp& o, std::unique_ptr<Plan>* out) {
  if (o.a_type != DType::f64) return Status::Unimplemented("the f64 reference only");
  if (o.b_type != DType::f64 || o.c_type != DType::f64)
    return Status::Unimplemented("the shared f64 GEMM takes f64 operands only");
  return make_plan(
      DType::f64, gemm_operands(o), "strided-batched GEMM", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        if constexpr (std::is_same_v<T, double>) gemm(o, b);
      },
      out);
}

Status plan_product(const ConvOp& o, std::unique_ptr<Plan>* out) {
  if (o.dtype != DType::f64) return Status::Unimplemented("the f64 reference only");
  if (o.epilogue != ConvEpilogue::none && o.direction != ConvDirection::forward)
    return Status::InvalidArgument("a convolution epilogue is for the forward direction");
  return make_plan(
      o.dtype, conv_operands(o), "direct convolution", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        if constexpr (std::is_same_v<T, double>) {
          if (o.direction == ConvDirection::forward) conv_forward(o, b);
          if (o.direction == ConvDirection::backward_data) conv_backward_data(o, b);
          if (o.direction == ConvDirection::backward_weights) conv_backward_weights(o, b);
        }
      },
      out);
}

Status plan_product(const FullyConnectedOp& o, std::unique_ptr<Plan>* out) {
  if (o.dtype != DType::f64) return Status::Unimplemented("the f64 reference only");
  return make_plan(
      o.dtype, fully_connected_operands(o), "fully connected", nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        if constexpr (std::is_same_v<T, double>) fully_connected(o, b);
      },
      out);
}

// An f64 GEMM, convolution, fully connected layer or fused attention.
bool is_f64_product(const OpDesc& op) {
  if (const auto* gemm = std::get_if<GemmOp>(&op)) return gemm->a_type == DType::f64;
  return (is_linear_product(op) || std::holds_alternative<AttentionOp>(op)) &&
         data_type(op) == DType::f64;
}

}  // namespace

Status plan_host_op(const OpDesc& op, std::unique_ptr<Plan>* out) {
  if (!is_f64_product(op)) return plan_shared_training_op(op, out);
  return std::visit(
      [&](const auto& o) -> Status {
        if constexpr (requires { plan_product(o, out); })
          return plan_product(o, out);
        else
          return Status::Unimplemented("not a product");  // is_f64_product said it was
      },
      op);
}

}  // namespace tb::cpu
