// A plain MPI_Allreduce loop (f32 sums, out of place) over nccl-tests' size sweep: the baseline
// that `trainbench run -w 'allreduce sizes=MIN:MAX:xFACTOR'` on a CPU backend is held against.
// Timed as trainbench times a collective: 5 warm-up calls; per sample a barrier, then enough
// calls to last 1 ms (sized by the fastest of three 2-call probes), the slowest rank's time per
// call; at least 5 samples and 0.5 s; the median. One JSON line per size on rank 0's stdout
// (scripts/collective_check.sh reads them). Usage: mpirun -np N trainbench-baseline-mpi-allreduce
// [MIN_BYTES MAX_BYTES FACTOR]
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/baselines/huge_buffer.h"

namespace {

double slowest(double seconds) {
  double max = 0;
  MPI_Allreduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

// Seconds per call, the slowest rank's, of `calls` back-to-back all-reduces after a barrier.
double timed(const float* send, float* recv, int count, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int c = 0; c < calls; ++c)
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return slowest((MPI_Wtime() - start) / calls);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const long min_bytes = argc > 1 ? std::atol(argv[1]) : 8;
  const long max_bytes = argc > 2 ? std::atol(argv[2]) : 1L << 30;
  const long factor = argc > 3 ? std::atol(argv[3]) : 2;
  if (min_bytes < 4 || max_bytes < min_bytes || factor < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: %s [MIN_BYTES>=4 MAX_BYTES FACTOR>=2]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const std::size_t max_count = static_cast<std::size_t>(max_bytes) / sizeof(float);
  auto send = huge_buffer<float>(max_count), recv = huge_buffer<float>(max_count);
  for (std::size_t i = 0; i < max_count; ++i) send[i] = static_cast<float>((i + rank) % 7);
  std::fill(recv.get(), recv.get() + max_count, 0.0f);
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    const int count = static_cast<int>(bytes / static_cast<long>(sizeof(float)));
    for (int w = 0; w < 5; ++w)
      MPI_Allreduce(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double one = INFINITY;  // the fastest of three probes of two calls, as trainbench sizes it
    for (int probe = 0; probe < 3; ++probe)
      one = std::min(one, timed(send.get(), recv.get(), count, 2));
    const int calls = static_cast<int>(std::clamp(std::ceil(1e-3 / one), 1.0, 1e5));
    std::vector<double> samples;
    const double start = MPI_Wtime();
    while (samples.size() < 1000 && (samples.size() < 5 || slowest(MPI_Wtime() - start) < 0.5))
      samples.push_back(timed(send.get(), recv.get(), count, calls));
    std::sort(samples.begin(), samples.end());
    const double median = samples[samples.size() / 2];
    // Every rank's element 0 is the sum of (0 + r) % 7 over the ranks.
    double expected = 0;
    for (int r = 0; r < ranks; ++r) expected += r % 7;
    const double algbw = static_cast<double>(bytes) / median / 1e9;
    if (rank == 0)
      std::printf(
          "{\"bytes\": %ld, \"ranks\": %d, \"seconds\": %.9g, \"algbw_gbps\": %.6g, "
          "\"busbw_gbps\": %.6g, \"calls_per_sample\": %d, \"samples\": %zu, \"check\": %s}\n",
          bytes, ranks, median, algbw, algbw * 2.0 * (ranks - 1) / ranks, calls, samples.size(),
          recv[0] == static_cast<float>(expected) ? "true" : "false");
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
