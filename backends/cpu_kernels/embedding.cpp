// Row gather and scatter-add: token embeddings and the masked positions BERT's head reads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu_kernels/kernel_plan.h"
#include "backends/cpu_kernels/training_families.h"
#include "backends/cpu_kernels/vector_kernels.h"
#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

template <typename T>
void embedding_forward(const EmbeddingOp& op, const BoundOperands& b) {
  const T* table = b.in<T>("table");
  const std::int32_t* ids = b.in<std::int32_t>("ids");
  T* dst = b.out<T>("dst");
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < op.tokens; ++t)
    std::copy(table + ids[t] * op.dim, table + (ids[t] + 1) * op.dim, dst + t * op.dim);
}

// G: the table gradient's type (fp32 for a bf16 weight table: fp32 master gradients).
template <typename T, typename G>
void embedding_backward(const EmbeddingOp& op, const BoundOperands& b) {
  const T* diff_dst = b.in<T>("diff_dst");
  const std::int32_t* ids = b.in<std::int32_t>("ids");
  G* diff_table = b.out<G>("diff_table");
  if (!op.accumulate) std::fill(diff_table, diff_table + op.vocab * op.dim, G(0));
    // Parallel over embedding columns: a row repeats across tokens, a column never collides.
#pragma omp parallel for schedule(static)
  for (Index d = 0; d < op.dim; ++d)
    for (Index t = 0; t < op.tokens; ++t)
      diff_table[ids[t] * op.dim + d] += static_cast<G>(diff_dst[t * op.dim + d]);
}

}  // namespace

Status plan_shared(const CpuKernels* /*k: plain loops*/, const EmbeddingOp& o,
                   std::unique_ptr<Plan>* out) {
  return make_plan<Bf16Data::accepted>(
      o.dtype, embedding_operands(o), o.pass == Pass::forward ? "row gather" : "row scatter-add",
      nullptr,
      [o]<typename T>(T, const BoundOperands& b) {
        if (o.pass == Pass::forward)
          embedding_forward<T>(o, b);
        else if (std::is_same_v<T, Bf16> && o.weight_table)
          embedding_backward<T, float>(o, b);
        else
          embedding_backward<T, T>(o, b);
      },
      out);
}

}  // namespace tb::cpu
