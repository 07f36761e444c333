#include "dist/world.h"

#include <cstdlib>
#include <stdexcept>

namespace tb {

#ifdef TRAINBENCH_WITH_MPI
std::unique_ptr<World> make_mpi_world(int* argc, char*** argv, std::chrono::seconds timeout);
#endif

std::chrono::seconds rank_timeout_from_environment() {
  const char* text = std::getenv("TRAINBENCH_RANK_TIMEOUT");
  if (!text) return kDefaultRankTimeout;
  char* end = nullptr;
  const long seconds = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || seconds <= 0)
    throw std::invalid_argument(
        std::string("TRAINBENCH_RANK_TIMEOUT must be a positive number of seconds, not '") + text +
        "'");
  return std::chrono::seconds(seconds);
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
