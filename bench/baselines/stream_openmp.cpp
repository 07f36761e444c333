// A plain OpenMP STREAM triad (a = b + s * c), built with trainbench's flags: the baseline that
// `trainbench run -w 'stream op=triad n=N'` is held against.
// Usage: trainbench-baseline-stream N [REPETITIONS]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bench/baselines/huge_buffer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s N [REPETITIONS]\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[1]);
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 20;
  auto a = huge_buffer<double>(n), b = huge_buffer<double>(n), c = huge_buffer<double>(n);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.5 + static_cast<double>(i % 7);
  }
  const double s = 3.0;
  std::vector<double> seconds;
  for (int r = 0; r < repetitions + 2; ++r) {
    const double start = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    if (r >= 2) seconds.push_back(omp_get_wtime() - start);  // two warm-up runs
  }
  std::sort(seconds.begin(), seconds.end());
  const double bytes = 3.0 * sizeof(double) * static_cast<double>(n);
  std::printf("stream triad n=%ld threads=%d: median %.1f GB/s, best %.1f GB/s (check %g)\n", n,
              omp_get_max_threads(), bytes / seconds[seconds.size() / 2] / 1e9,
              bytes / seconds.front() / 1e9, a[n / 2]);
  return 0;
}
