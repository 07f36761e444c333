#include "backends/cpu/peak.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/low_precision.h"

namespace tb::cpu {
namespace {

// Enough independent chains to cover FMA latency (4-5 cycles) on two pipes.
constexpr int kChains = 12;

double mean(const float* values, std::size_t count) {
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += values[i];
  return sum / static_cast<double>(count);
}

__attribute__((target("avx512f"))) double fma_avx512(std::int64_t iterations, float one_value,
                                                     float increment) {
  const __m512 one = _mm512_set1_ps(one_value), inc = _mm512_set1_ps(increment);
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, one, inc);
  alignas(64) float lanes[kChains][16];
  for (int chain = 0; chain < kChains; ++chain) _mm512_store_ps(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kChains * 16);
}

__attribute__((target("avx2,fma"))) double fma_avx2(std::int64_t iterations, float one_value,
                                                    float increment) {
  const __m256 one = _mm256_set1_ps(one_value), inc = _mm256_set1_ps(increment);
  __m256 acc[kChains];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, one, inc);
  alignas(32) float lanes[kChains][8];
  for (int chain = 0; chain < kChains; ++chain) _mm256_store_ps(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kChains * 8);
}

// vdpbf16ps: each fp32 lane accumulates two bf16 products: 32 multiply-adds per instruction.
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_avx512(std::int64_t iterations,
                                                                   float one_value,
                                                                   float increment) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(static_cast<short>(float_to_bf16(one_value)));
  const __m512bh inc = (__m512bh)_mm512_set1_epi16(static_cast<short>(float_to_bf16(increment)));
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, one, inc);
  alignas(64) float lanes[kChains][16];
  for (int chain = 0; chain < kChains; ++chain) _mm512_store_ps(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kChains * 16);
}

// AMX: four 16x16 fp32 accumulator tiles, each += A (16x32 bf16) x B (32x16 bf16) per
// iteration. B holds increment / 16 so every element gains 32 * increment / 16 = 2 increments
// per iteration, as the bf16 dot-product chains do.
struct alignas(64) TileConfig {
  std::uint8_t palette_id = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16(std::int64_t iterations,
                                                             float one_value, float increment) {
  TileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    config.rows[tile] = 16;
    config.bytes_per_row[tile] = 64;
  }
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t a[16 * 32], b[16 * 32];
  std::fill(std::begin(a), std::end(a), float_to_bf16(one_value));
  std::fill(std::begin(b), std::end(b), float_to_bf16(increment / 16));
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  for (std::int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[4][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  _tile_release();
  return mean(&c[0][0], 4 * 16 * 16);
}

// The kernel may run only after the OS granted this process the AMX tile state.
bool amx_permitted() {
  constexpr int kArchRequestXcompPermission = 0x1023, kXfeatureTileData = 18;
  return syscall(SYS_arch_prctl, kArchRequestXcompPermission, kXfeatureTileData) == 0;
}

struct PeakKernel {
  double (*function)(std::int64_t, float, float) = nullptr;
  double flops_per_iteration = 0;  // per thread
  const char* name = "";
};

// The fastest probe this CPU can run for the dtype.
PeakKernel select_kernel(DType dtype, const HostInventory& host) {
  if (dtype == DType::f32 && host.has_isa("avx512f"))
    return {fma_avx512, kChains * 16 * 2, "avx512 vfmadd231ps zmm, 12 chains"};
  if (dtype == DType::f32 && host.has_isa("avx2") && host.has_isa("fma"))
    return {fma_avx2, kChains * 8 * 2, "avx2 vfmadd231ps ymm, 12 chains"};
  if (dtype == DType::bf16 && host.has_isa("amx_bf16") && amx_permitted())
    return {amx_bf16, 4 * 16 * 16 * 32 * 2, "amx_bf16 tdpbf16ps, 4 accumulator tiles"};
  if (dtype == DType::bf16 && host.has_isa("avx512_bf16"))
    return {dpbf16_avx512, kChains * 16 * 4, "avx512_bf16 vdpbf16ps zmm, 12 chains"};
  return {};
}

class PeakPlan final : public CpuPlan {
 public:
  PeakPlan(const PeakOp& op, PeakKernel kernel, int threads)
      : op_(op), kernel_(kernel), threads_(threads) {
    operands_ = {{"per_thread", DType::f64, {threads}, threads * sizeof(double), true}};
    implementation_ = kernel.name;
    math_mode_ = dtype_name(op.dtype);
    flops_per_execution_ =
        threads * kernel.flops_per_iteration * static_cast<double>(op.iterations);
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    auto* per_thread = static_cast<double*>(operands[0].data);
    // Read through volatile so the compiler cannot fold the multiply by one.
    volatile float one = 1.0f, increment = static_cast<float>(kPeakIncrement);
    const float one_value = one, increment_value = increment;
#pragma omp parallel num_threads(threads_)
    per_thread[omp_get_thread_num()] = kernel_.function(op_.iterations, one_value, increment_value);
    return Status::Ok();
  }

 private:
  PeakOp op_;
  PeakKernel kernel_;
  int threads_;
};

}  // namespace

Status plan_peak(const PeakOp& op, const HostInventory& host, int threads,
                 std::unique_ptr<Plan>* out) {
  if (op.iterations <= 0 || op.iterations > kPeakMaxIterations)
    return Status::InvalidArgument(
        fmt::format("peak iterations must be in 1..{}, got {}", kPeakMaxIterations, op.iterations));
  const PeakKernel kernel = select_kernel(op.dtype, host);
  if (!kernel.function)
    return Status::Unimplemented(fmt::format("no {} peak kernel for this CPU (needs {})",
                                             dtype_name(op.dtype),
                                             op.dtype == DType::bf16 ? "avx512_bf16" : "avx2+fma"));
  *out = std::make_unique<PeakPlan>(op, kernel, threads);
  return Status::Ok();
}

PeakRates theoretical_peak(const HostInventory& host, int threads, double clock_ghz) {
  // Two FMA pipes per core is what current x86 server cores have for their widest vectors.
  constexpr int kFmaPipes = 2;
  // AMX: one 16x16x32 bf16 tile product (16,384 flops) per 16 cycles per core.
  constexpr int kAmxBf16FlopsPerCycle = 1024;
  const int lanes = host.has_isa("avx512f") ? 16 : host.has_isa("avx2") ? 8 : 4;
  PeakRates rates;
  rates.fp32_gflops = threads * kFmaPipes * lanes * 2.0 * clock_ghz;
  std::string bf16_model = "none";
  if (host.has_isa("amx_bf16")) {
    rates.bf16_gflops = threads * kAmxBf16FlopsPerCycle * clock_ghz;
    bf16_model = fmt::format("AMX {} flops/cycle/core", kAmxBf16FlopsPerCycle);
  } else if (host.has_isa("avx512_bf16")) {
    rates.bf16_gflops = 2 * rates.fp32_gflops;
    bf16_model = "vdpbf16ps at the FMA rate, 2x fp32";
  }
  rates.model = fmt::format(
      "fp32: {} threads x {} FMA pipes x {} lanes x 2 flops x {:.2f} GHz measured; bf16: {}",
      threads, kFmaPipes, lanes, clock_ghz, bf16_model);
  return rates;
}

}  // namespace tb::cpu
