// trainbench: measures deep-learning training work on CPUs and GPUs through interchangeable
// backends and writes validated, versioned JSON reports.
#include <exception>
#include <memory>

#include <fmt/format.h>

#include "backends/status.h"
#include "bench/command_line.h"
#include "dist/world.h"

namespace {

// One line and the exit code; across ranks the whole job ends with it (a rank that stopped
// alone would leave the others waiting for it).
int fail(tb::World* world, const char* what, int exit_code) {
  if (world && world->size() > 1) world->abort(fmt::format("error: {}", what), exit_code);
  fmt::print(stderr, "trainbench: error: {}\n", what);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<tb::World> world;
  try {
    // First: under a launcher MPI_Init may take arguments of its own.
    world = tb::make_world(&argc, &argv, tb::rank_timeout_from_environment());
    return tb::run_command_line(argc, argv, *world);
  } catch (const tb::UsageError& e) {
    return fail(world.get(), e.what(), 2);
  } catch (const std::exception& e) {
    return fail(world.get(), e.what(), 1);
  }
}
