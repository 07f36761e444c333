#include "dist/world.h"

#include <stdexcept>

namespace tb {

#ifdef TRAINBENCH_WITH_MPI
std::unique_ptr<World> make_mpi_world(int* argc, char*** argv, std::chrono::seconds timeout);
#endif

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
