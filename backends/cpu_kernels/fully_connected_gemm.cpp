#include "backends/cpu_kernels/fully_connected_gemm.h"

#include <algorithm>
#include <cstring>

#include "backends/low_precision.h"

namespace tb::cpu {
namespace {

// Each thread sums a block of columns row by row, so every read is contiguous.
template <typename Element, typename ToFloat>
void block_column_sums(const Element* diff_dst, std::int64_t rows, std::int64_t cols, float* sums,
                       ToFloat to_float) {
  constexpr std::int64_t kBlock = 256;
#pragma omp parallel for schedule(static)
  for (std::int64_t first = 0; first < cols; first += kBlock) {
    const std::int64_t width = std::min(kBlock, cols - first);
    double partial[kBlock] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const Element* row = diff_dst + r * cols + first;
      for (std::int64_t c = 0; c < width; ++c) partial[c] += to_float(row[c]);
    }
    for (std::int64_t c = 0; c < width; ++c) sums[first + c] = static_cast<float>(partial[c]);
  }
}

}  // namespace

void column_sums(const float* diff_dst, std::int64_t rows, std::int64_t cols, float* sums) {
  block_column_sums(diff_dst, rows, cols, sums, [](float v) { return v; });
}

void column_sums(const std::uint16_t* diff_dst, DType dtype, std::int64_t rows, std::int64_t cols,
                 float* sums) {
  if (dtype == DType::f16)
    block_column_sums(diff_dst, rows, cols, sums, [](std::uint16_t v) { return f16_to_float(v); });
  else
    block_column_sums(diff_dst, rows, cols, sums, [](std::uint16_t v) { return bf16_to_float(v); });
}

Status fully_connected_with_gemm(const FullyConnectedOp& op, const BoundOperands& b,
                                 RowMajorSgemm sgemm) {
  const std::int64_t mb = op.mb, in = op.in, out = op.out;
  switch (op.direction) {
    case ConvDirection::forward: {  // dst = src W^T + bias
      float* dst = b.out<float>("dst");
      const float* bias = b.in<float>("bias");
#pragma omp parallel for schedule(static)
      for (std::int64_t n = 0; n < mb; ++n)
        std::memcpy(dst + n * out, bias, static_cast<std::size_t>(out) * sizeof(float));
      if (!sgemm('N', 'T', mb, out, in, 1.0f, b.in<float>("src"), in, b.in<float>("weights"), in,
                 1.0f, dst, out))
        return Status::LibraryFailed("fully connected forward: the sgemm call was refused");
      return Status::Ok();
    }
    case ConvDirection::backward_data:  // diff_src = diff_dst W
      if (!sgemm('N', 'N', mb, in, out, 1.0f, b.in<float>("diff_dst"), out, b.in<float>("weights"),
                 in, 0.0f, b.out<float>("diff_src"), in))
        return Status::LibraryFailed("fully connected backward-data: the sgemm call was refused");
      return Status::Ok();
    case ConvDirection::backward_weights: {  // diff_W = diff_dst^T src
      const float* diff_dst = b.in<float>("diff_dst");
      if (!sgemm('T', 'N', out, in, mb, 1.0f, diff_dst, out, b.in<float>("src"), in, 0.0f,
                 b.out<float>("diff_weights"), in))
        return Status::LibraryFailed(
            "fully connected backward-weights: the sgemm call was refused");
      column_sums(diff_dst, mb, out, b.out<float>("diff_bias"));
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown fully connected direction");
}

}  // namespace tb::cpu
