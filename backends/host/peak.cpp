#include "backends/host/peak.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "backends/host/host_plan.h"
#include "backends/host/peak_arm.h"
#include "backends/host/peak_table.h"
#include "backends/low_precision.h"
#include "backends/operands.h"

namespace tb::cpu {
namespace {

// Enough independent chains to cover FMA latency (4-5 cycles) on two pipes, and SSE2's
// mul + add latency (6-8 cycles) on up to four.
constexpr int kChains = 12;
// vdpbf16ps has a longer latency than an FMA (6 cycles on Zen 4, more on some parts) on two
// pipes: 12 chains left the probe at 86% of theoretical on a Zen 5 (770 GFLOP/s), below
// oneDNN's bf16 convolutions; 16 reach 95% (840-870). 24 measured 648: more chains than the
// loop keeps in registers.
constexpr int kDotChains = 16;

double mean(const float* values, std::size_t count) {
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += values[i];
  return sum / static_cast<double>(count);
}

#if defined(__x86_64__)

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

// SSE2, the portable level: no FMA, so a mul then an add per step (2 FLOP, as an FMA counts).
double mul_add_sse(std::int64_t iterations, float one_value, float increment) {
  const __m128 one = _mm_set1_ps(one_value), inc = _mm_set1_ps(increment);
  __m128 acc[kChains];
  for (auto& a : acc) a = _mm_setzero_ps();
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm_add_ps(_mm_mul_ps(a, one), inc);
  alignas(16) float lanes[kChains][4];
  for (int chain = 0; chain < kChains; ++chain) _mm_store_ps(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kChains * 4);
}

// vdpbf16ps: each fp32 lane accumulates two bf16 products: 32 multiply-adds per instruction.
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_avx512(std::int64_t iterations,
                                                                   float one_value,
                                                                   float increment) {
  const __m512bh one = (__m512bh)_mm512_set1_epi16(static_cast<short>(float_to_bf16(one_value)));
  const __m512bh inc = (__m512bh)_mm512_set1_epi16(static_cast<short>(float_to_bf16(increment)));
  __m512 acc[kDotChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, one, inc);
  alignas(64) float lanes[kDotChains][16];
  for (int chain = 0; chain < kDotChains; ++chain) _mm512_store_ps(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kDotChains * 16);
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

#elif defined(__aarch64__)

// Advanced SIMD (NEON), the portable level on aarch64: fmla v.4s, one FMA per step.
double fma_neon(std::int64_t iterations, float one_value, float increment) {
  const float32x4_t one = vdupq_n_f32(one_value), inc = vdupq_n_f32(increment);
  float32x4_t acc[kChains];
  for (auto& a : acc) a = vdupq_n_f32(0);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = vfmaq_f32(inc, a, one);
  alignas(16) float lanes[kChains][4];
  for (int chain = 0; chain < kChains; ++chain) vst1q_f32(lanes[chain], acc[chain]);
  return mean(&lanes[0][0], kChains * 4);
}

#else

// Any other architecture: whatever the compiler makes of 12 scalar chains.
double mul_add_scalar(std::int64_t iterations, float one_value, float increment) {
  float acc[kChains] = {};
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = a * one_value + increment;
  return mean(acc, kChains);
}

#endif

struct PeakKernel {
  double (*function)(std::int64_t, float, float) = nullptr;
  double flops_per_iteration = 0;  // per thread
  const char* name = "";
};

#if defined(__x86_64__)

// The fp32 probe of a level (one the CPU runs: IsaLevel never names a level above it).
PeakKernel fp32_kernel(const HostInventory&, Isa level) {
  switch (level) {
    case Isa::avx512:
      return {fma_avx512, kChains * 16 * 2, "avx512: vfmadd231ps zmm, 12 chains"};
    case Isa::avx2:
      return {fma_avx2, kChains * 8 * 2, "avx2: vfmadd231ps ymm, 12 chains"};
    case Isa::portable:
      break;
  }
  return {mul_add_sse, kChains * 4 * 2, "portable: SSE2 mulps + addps xmm, 12 chains"};
}

// bf16 needs the avx512 level: vdpbf16ps is AVX-512, and AMX sits above it.
PeakKernel bf16_kernel(const HostInventory& host, const IsaLevel& level) {
  if (level.isa != Isa::avx512) return {};
  if (level.amx && host.has_isa("amx_bf16") && amx_permitted())
    return {amx_bf16, 4 * 16 * 16 * 32 * 2, "amx_bf16: tdpbf16ps, 4 accumulator tiles"};
  if (host.has_isa("avx512_bf16"))
    return {dpbf16_avx512, kDotChains * 16 * 4, "avx512_bf16: vdpbf16ps zmm, 16 chains"};
  return {};
}

constexpr const char* kBf16Needs = "bf16 needs the avx512 level with avx512_bf16 or amx_bf16";

#elif defined(__aarch64__)

// SVE where the kernel reports it (its vector length may exceed NEON's 128 bits, as Neoverse
// V1's 256), else NEON. Only this process's own feature bits count: a fake host in a test has
// no CPU to run SVE on.
PeakKernel fp32_kernel(const HostInventory& host, Isa) {
  if (host.arm.sve && host_arm_features().sve) {
    const int lanes = sve_fp32_lanes();
    return {fma_sve, kChains * lanes * 2.0,
            lanes * 32 == 128   ? "sve: fmla z.s (128-bit vectors), 12 chains"
            : lanes * 32 == 256 ? "sve: fmla z.s (256-bit vectors), 12 chains"
                                : "sve: fmla z.s (the CPU's vector length), 12 chains"};
  }
  return {fma_neon, kChains * 4 * 2, "portable: NEON fmla v.4s, 12 chains"};
}

PeakKernel bf16_kernel(const HostInventory& host, const IsaLevel&) {
  if (host.arm.bf16 && host_arm_features().bf16)
    return {bfmmla_neon, kChains * 16 * 2, "bf16: NEON bfmmla (2x4 by 4x2), 12 chains"};
  return {};
}

constexpr const char* kBf16Needs = "bf16 needs FEAT_BF16 (bfmmla; Neoverse V1, V2, N2)";

#else

PeakKernel fp32_kernel(const HostInventory&, Isa) {
  return {mul_add_scalar, kChains * 2, "portable: scalar mul + add, 12 chains"};
}

PeakKernel bf16_kernel(const HostInventory&, const IsaLevel&) {
  return {};
}

constexpr const char* kBf16Needs = "no bf16 probe on this architecture";

#endif

class PeakPlan final : public CpuPlan {
 public:
  PeakPlan(const PeakOp& op, PeakKernel kernel, int threads, const IsaLevel& level)
      : op_(op), kernel_(kernel), threads_(threads) {
    operands_ = peak_operands(threads);
    implementation_ = fmt::format("{} (level {})", kernel.name, level.reason);
    math_mode_ = dtype_name(op.dtype);
    flops_per_execution_ =
        threads * kernel.flops_per_iteration * static_cast<double>(op.iterations);
  }

  Status run(std::span<const Buffer> operands, Buffer) override {
    auto* per_thread = BoundOperands(operands_, operands).out<double>("per_worker");
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

// About 1 ms of the fp32 probe (12 vector ops per iteration at one or two per cycle), the load
// each clock window follows.
constexpr std::int64_t kBurstIterations = 400'000;

template <double (*Kernel)(std::int64_t, float, float)>
void vector_burst() {
  // Real data (not zeros) so the units draw the power they draw in the probe.
  volatile float one = 1.0f, increment = static_cast<float>(kPeakIncrement);
  volatile double sink = Kernel(kBurstIterations, one, increment);
  (void)sink;
}

// The levels as the host's flags show them (a fake host in tests has no CPU to ask).
bool host_runs(const HostInventory& host, Isa level) {
  switch (level) {
    case Isa::portable:
      return true;
    case Isa::avx2:
      return host.has_isa("avx2") && host.has_isa("fma");
    case Isa::avx512:
      return host.has_isa("avx512f") && host.has_isa("avx512bw") && host.has_isa("avx512dq") &&
             host.has_isa("avx512vl");
  }
  return false;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<IsaLevel> parse_onednn_isa_cap(std::string_view value) {
  const std::string name = upper(value);
  const std::string reason = fmt::format("ONEDNN_MAX_CPU_ISA={}", value);
  if (name == "ALL" || name == "DEFAULT" || name.find("AMX") != std::string::npos)
    return IsaLevel{Isa::avx512, true, reason};
  if (name.starts_with("AVX512") || name.starts_with("AVX10"))
    return IsaLevel{Isa::avx512, false, reason};
  if (name.starts_with("AVX2")) return IsaLevel{Isa::avx2, false, reason};
  if (name == "AVX" || name == "SSE41") return IsaLevel{Isa::portable, false, reason};
#if defined(__aarch64__)
  // oneDNN's AArch64 levels (ADVANCED_SIMD, SVE_128 ... SVE_512): they cap its kernels; ours
  // have one level there, portable.
  if (name == "ADVANCED_SIMD" || name.starts_with("SVE_"))
    return IsaLevel{Isa::portable, false, reason};
#endif
  return std::nullopt;
}

namespace {

// Lowers `level` to what oneDNN's cap `variable`=`value` lets its kernels run. A value that
// names no ISA (which oneDNN would ignore without a word) is an InvalidArgument.
Status apply_onednn_cap(const char* variable, const char* value, IsaLevel* level) {
  const std::optional<IsaLevel> cap = parse_onednn_isa_cap(value);
  if (!cap) {
    return Status::InvalidArgument(
        fmt::format("{}='{}' names no ISA oneDNN knows (for example SSE41, AVX2, AVX512_CORE, "
                    "AVX512_CORE_AMX or ALL); unset it or give one",
                    variable, value));
  } else if (cap->isa < level->isa) {
    *level = {cap->isa, false, fmt::format("{}, {}={}", isa_name(cap->isa), variable, value)};
  } else if (level->amx && !cap->amx) {
    level->amx = false;
    level->reason += fmt::format(", no AMX: {}={}", variable, value);
  }
  return Status::Ok();
}

}  // namespace

Status isa_level_from_environment(bool onednn_cap, IsaLevel* out) {
  Isa chosen = Isa::portable;
  TB_RETURN_IF_ERROR(isa_from_environment(&chosen));
  const char* ours = std::getenv("TRAINBENCH_MAX_ISA");
  IsaLevel level{chosen, chosen == Isa::avx512,
                 ours && *ours ? fmt::format("{}, TRAINBENCH_MAX_ISA={}", isa_name(chosen), ours)
                               : fmt::format("{}, the best this CPU runs", isa_name(chosen))};
  if (onednn_cap)
    for (const char* variable : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})  // oneDNN's order
      if (const char* value = std::getenv(variable); value && *value) {
        TB_RETURN_IF_ERROR(apply_onednn_cap(variable, value, &level));
        break;
      }
  *out = level;
  return Status::Ok();
}

Status plan_peak(const PeakOp& op, const HostInventory& host, int threads, const IsaLevel& level,
                 std::unique_ptr<Plan>* out) {
  if (op.iterations <= 0 || op.iterations > kPeakMaxIterations)
    return Status::InvalidArgument(
        fmt::format("peak iterations must be in 1..{}, got {}", kPeakMaxIterations, op.iterations));
  const PeakKernel kernel = op.dtype == DType::f32    ? fp32_kernel(host, level.isa)
                            : op.dtype == DType::bf16 ? bf16_kernel(host, level)
                                                      : PeakKernel{};
  if (!kernel.function)
    return Status::Unimplemented(fmt::format("no {} peak kernel at level {} ({})",
                                             dtype_name(op.dtype), level.reason, kBf16Needs))
        .because(op.dtype == DType::f32 || op.dtype == DType::bf16 ? ReasonCode::isa_lacking
                                                                   : ReasonCode::dtype_unsupported);
  *out = std::make_unique<PeakPlan>(op, kernel, threads, level);
  return Status::Ok();
}

double measure_clock_under_probe(Isa level, int threads) {
#if defined(__aarch64__)
  (void)level;
  return measure_clock_ghz(threads, vector_burst<fma_neon>);
#elif !defined(__x86_64__)
  (void)level;
  return measure_clock_ghz(threads, vector_burst<mul_add_scalar>);
#else
  switch (level) {
    case Isa::avx512:
      return measure_clock_ghz(threads, vector_burst<fma_avx512>);
    case Isa::avx2:
      return measure_clock_ghz(threads, vector_burst<fma_avx2>);
    case Isa::portable:
      break;
  }
  return measure_clock_ghz(threads, vector_burst<mul_add_sse>);
#endif
}

std::string clock_method(Isa level, int threads) {
#if defined(__aarch64__)
  (void)level;
  return fmt::format(
      "median over {} threads of each one's fastest window of dependent mul (2 cycles each on "
      "Neoverse N1 / N2 / V1 / V2), every window right after 1 ms of the NEON fp32 probe on all "
      "threads at once",
      threads);
#else
  return fmt::format(
      "median over {} threads of each one's fastest 0.15 ms window of dependent imul (3 cycles "
      "each), every window right after 1 ms of the {} fp32 probe on all threads at once",
      threads, isa_name(level));
#endif
}

PeakRates theoretical_peak(const HostInventory& host, double cores, const IsaLevel& level,
                           double clock_ghz) {
  const PeakSpec spec = lookup_peak_spec(host.cpu);
  const bool runs = host_runs(host, level.isa);
  const double fp32 = runs ? fp32_flops_per_cycle(spec.row, level.isa) : 0;
  const bool amx = level.amx && host.has_isa("amx_bf16") && spec.row.matrix_bf16_per_cycle > 0;
  const bool arm = arm_row(spec.row);
  const bool has_bf16 = host.has_isa(arm ? "bf16" : "avx512_bf16");
  const double bf16 = runs ? bf16_flops_per_cycle(spec.row, level.isa, has_bf16, amx) : 0;
  std::string bf16_model;
  if (bf16 > 0 && arm)
    bf16_model = fmt::format(
        "bfmmla, {:g} x 128 bits/cycle x 32 FLOP (2x4 by 4x2 bf16: 16 multiply-adds) = {:g} "
        "FLOP/cycle, theoretical, unverified on hardware",
        bf16 / 32, bf16);
  else if (bf16 > 0 && amx)
    bf16_model = fmt::format("AMX {:g} FLOP/cycle", bf16);
  else if (bf16 > 0)
    bf16_model = fmt::format(
        "vdpbf16ps, 2 bf16 products per fp32 lane at the 512-bit FMA rate = {:g} FLOP/cycle", bf16);
  else if (arm && has_bf16)
    bf16_model = "not stated: the table has no bfmmla rate for this CPU (the probe measures it)";
  else if (arm)
    bf16_model = "none: the CPU lacks BF16 (bfmmla)";
  else
    bf16_model = "none at this level";
  PeakRates rates;
  rates.fp32_gflops = cores * fp32 * clock_ghz;
  rates.bf16_gflops = cores * bf16 * clock_ghz;
  rates.model = fmt::format(
      "{:g} physical cores x FLOP/cycle/core x {:.2f} GHz (measured under the {} probe); fp32 at "
      "{}: {}; bf16: {}",
      cores, clock_ghz, isa_name(level.isa), level.reason,
      runs ? fp32_formula(spec.row, level.isa) : "the CPU's flags lack this level", bf16_model);
  rates.basis =
      spec.row.note.empty() ? spec.basis : fmt::format("{}: {}", spec.basis, spec.row.note);
  rates.source = spec.row.source;
  return rates;
}

std::vector<LevelPeak> fp32_peak_by_level(const HostInventory& host, double cores,
                                          double clock_ghz) {
  const PeakSpec spec = lookup_peak_spec(host.cpu);
  std::vector<LevelPeak> peaks;
  for (Isa level : {Isa::portable, Isa::avx2, Isa::avx512}) {
    const double per_cycle = fp32_flops_per_cycle(spec.row, level);
    if (host_runs(host, level) && per_cycle > 0)
      peaks.push_back({level, cores * per_cycle * clock_ghz, fp32_formula(spec.row, level)});
  }
  return peaks;
}

}  // namespace tb::cpu
