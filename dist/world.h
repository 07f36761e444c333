// How a run finds its ranks: under mpirun, mpiexec or srun one process per rank over MPI,
// otherwise a single process (backends/communicator.h says what World and Communicator offer).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "backends/communicator.h"

namespace tb {

// The launcher this process was started by, read from the variables it sets ("Open MPI",
// "Slurm", "PMI"), or empty for a process started on its own.
std::string detected_launcher();

// How long a rank waits in a host-side exchange for the others before it ends the job: a rank
// that died or hangs must not leave the rest waiting for ever.
inline constexpr std::chrono::seconds kDefaultRankTimeout{1800};
inline constexpr std::chrono::seconds kLongestRankTimeout{7 * 24 * 3600};
// TRAINBENCH_RANK_TIMEOUT (whole seconds) where set, else the default; throws UsageError for a
// value that is not a whole number from 1 to kLongestRankTimeout.
std::chrono::seconds rank_timeout_from_environment();

// The World of this process. Under a launcher (and when MPI is built in) MPI is initialised,
// finalised when the World is destroyed; a launcher without MPI built in is an error (throws
// std::runtime_error), since every rank would otherwise run alone and write its own report.
std::unique_ptr<World> make_world(int* argc, char*** argv,
                                  std::chrono::seconds rank_timeout = kDefaultRankTimeout);

// One rank, no MPI: collectives copy their input (the sum over one rank).
std::unique_ptr<World> make_single_process_world();

}  // namespace tb
