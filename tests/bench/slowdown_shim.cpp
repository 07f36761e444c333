// A planted slow-down for testing the regression gate: preloaded (LD_PRELOAD) in front of
// OpenBLAS, it times every cblas_sgemm and then busy-waits TRAINBENCH_SLOWDOWN (a fraction,
// default 0.15) of that time more, so each call takes (1 + fraction) times as long and the
// numbers are unchanged. Busy-waiting, not sleeping: the thread stays on its core as a slower
// kernel would. TRAINBENCH_SLOWDOWN_MNK=M,N,K slows only calls of that shape, so one case is
// slowed and the others (a convolution's sgemm calls, say) are controls.
// It also plants a crash: TRAINBENCH_CRASH_MNK=M,N,K makes a call of that shape divide by zero
// (SIGFPE), as a library that derived a zero block size from the machine would.
#include <dlfcn.h>

#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

using Sgemm = void (*)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                       const enum CBLAS_TRANSPOSE, const blasint, const blasint, const blasint,
                       const float, const float*, const blasint, const float*, const blasint,
                       const float, float*, const blasint);

double slowdown_fraction() {
  const char* text = std::getenv("TRAINBENCH_SLOWDOWN");
  return text ? std::atof(text) : 0.15;
}

struct Shape {
  long m = -1, n = -1, k = -1;  // -1: any
};

Shape shape_from(const char* variable) {
  Shape shape;
  if (const char* text = std::getenv(variable))
    std::sscanf(text, "%ld,%ld,%ld", &shape.m, &shape.n, &shape.k);
  return shape;
}

bool matches(const Shape& shape, long m, long n, long k) {
  return (shape.m < 0 || shape.m == m) && (shape.n < 0 || shape.n == n) &&
         (shape.k < 0 || shape.k == k);
}

// An integer division by a zero the compiler cannot see: the CPU raises SIGFPE.
__attribute__((noinline, no_sanitize("integer-divide-by-zero"))) int divide_by_zero(long m) {
  volatile long zero = 0;
  volatile long quotient = m / zero;  // stored, so the division cannot be left out
  return static_cast<int>(quotient);
}

}  // namespace

extern "C" void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans_a,
                            const enum CBLAS_TRANSPOSE trans_b, const blasint m, const blasint n,
                            const blasint k, const float alpha, const float* a, const blasint lda,
                            const float* b, const blasint ldb, const float beta, float* c,
                            const blasint ldc) {
  static const auto real = reinterpret_cast<Sgemm>(dlsym(RTLD_NEXT, "cblas_sgemm"));
  static const double fraction = slowdown_fraction();
  static const Shape shape = shape_from("TRAINBENCH_SLOWDOWN_MNK");
  static const bool crash_planted = std::getenv("TRAINBENCH_CRASH_MNK") != nullptr;
  static const Shape crash_shape = shape_from("TRAINBENCH_CRASH_MNK");
  if (!real) {
    std::fprintf(stderr, "slowdown_shim: no cblas_sgemm after the shim\n");
    std::abort();
  }
  if (crash_planted && matches(crash_shape, m, n, k)) divide_by_zero(m);
  if (!matches(shape, m, n, k)) {
    real(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  real(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const auto until = Clock::now() + (Clock::now() - start) * fraction;
  while (Clock::now() < until) {
  }
}
