// The World of the test_dist program: MPI's under mpiexec (tests/CMakeLists.txt runs it with
// trainbench_add_mpi_test), a single process otherwise.
#pragma once
#include "backends/communicator.h"

namespace tb::test {

World& world();

}  // namespace tb::test
