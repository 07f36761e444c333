// OpenBLAS cblas_sgemm called directly, fp32 row-major: the baseline that
// `trainbench run -b cpu-openblas -w 'gemm m=M n=N k=K'` is held against.
// Usage: trainbench-baseline-openblas-sgemm M N K [REPETITIONS]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

#include "bench/baselines/huge_buffer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [REPETITIONS]\n", argv[0]);
    return 2;
  }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
  const int repetitions = argc > 4 ? std::atoi(argv[4]) : 20;
  const size_t a_count = static_cast<size_t>(m) * k, b_count = static_cast<size_t>(k) * n,
               c_count = static_cast<size_t>(m) * n;
  auto a = huge_buffer<float>(a_count), b = huge_buffer<float>(b_count),
       c = huge_buffer<float>(c_count);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (auto [data, count] : {std::pair{a.get(), a_count}, {b.get(), b_count}, {c.get(), c_count}})
    for (size_t i = 0; i < count; ++i) data[i] = uniform(rng);
  std::vector<double> seconds;
  for (int r = 0; r < repetitions + 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.get(), k, b.get(), n,
                0.0f, c.get(), n);
    if (r >= 3)
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double flops = 2.0 * m * n * k;
  std::printf(
      "openblas sgemm %dx%dx%d: median %.1f GFLOP/s, best %.1f GFLOP/s (%s kernels, %d threads)\n",
      m, n, k, flops / seconds[seconds.size() / 2] / 1e9, flops / seconds.front() / 1e9,
      openblas_get_corename(), openblas_get_num_threads());
  return 0;
}
