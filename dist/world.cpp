#include "dist/world.h"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/numbers.h"
#include "backends/status.h"

namespace tb {

#ifdef TRAINBENCH_WITH_MPI
std::unique_ptr<World> make_mpi_world(int* argc, char*** argv, std::chrono::seconds timeout);
#endif

std::chrono::seconds rank_timeout_from_environment() {
  const char* text = std::getenv("TRAINBENCH_RANK_TIMEOUT");
  if (!text) return kDefaultRankTimeout;
  // At most a week: a deadline of now + timeout must not wrap the clock.
  const auto seconds = parse_whole_number(text, 1, kLongestRankTimeout.count());
  if (!seconds)
    throw UsageError(fmt::format(
        "TRAINBENCH_RANK_TIMEOUT must be a whole number of seconds from 1 to {}, not '{}'",
        kLongestRankTimeout.count(), text));
  return std::chrono::seconds(*seconds);
}

std::unique_ptr<World> make_world(int* argc, char*** argv, std::chrono::seconds rank_timeout) {
  const std::string launcher = detected_launcher();
  if (launcher.empty()) return make_single_process_world();
#ifdef TRAINBENCH_WITH_MPI
  return make_mpi_world(argc, argv, rank_timeout);
#else
  (void)argc, (void)argv, (void)rank_timeout;
  throw std::runtime_error(
      "started by " + launcher +
      " but this build has no MPI (configure with -DTRAINBENCH_MPI=ON, Open MPI "
      "from scripts/setup.sh): each rank would run alone");
#endif
}

}  // namespace tb
