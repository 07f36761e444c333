// test_dist's main: the World is made before GoogleTest sees the arguments (MPI_Init may take
// its own), and a test that failed on any rank fails the program on every rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "dist/world.h"
#include "tests/dist/world_fixture.h"

namespace tb::test {
namespace {
World* the_world = nullptr;  // set once in main, before any test runs
}  // namespace

World& world() {
  return *the_world;
}

}  // namespace tb::test

int main(int argc, char** argv) {
  // 120 s unless the test sets TRAINBENCH_RANK_TIMEOUT (a stopped rank's test waits it out).
  const auto timeout = std::getenv("TRAINBENCH_RANK_TIMEOUT") ? tb::rank_timeout_from_environment()
                                                              : std::chrono::seconds(120);
  std::unique_ptr<tb::World> world = tb::make_world(&argc, &argv, timeout);
  tb::test::the_world = world.get();
  testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  return static_cast<int>(world->max(failed));
}
