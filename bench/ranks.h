// The ranks of a `trainbench run` (one process per rank under mpirun or srun, one rank
// otherwise): what they must agree on before the first case, the report's world block, and one
// case's results from every rank folded into the result rank 0 writes.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/communicator.h"
#include "reports/report.h"

namespace tb {

// FNV-1a of this program's file (/proc/self/exe): ranks running different builds differ.
std::string binary_fingerprint();

// Every rank calls it with what it is about to run (backends and canonical descriptors, one a
// line). Ranks that run another binary or another plan end the job (World::abort), naming the
// rank and the first difference: their results could not be combined.
void require_ranks_agree(World& world, const std::string& plan);

// A rank's CPUs for the CPU backends.
struct CpuShare {
  std::vector<int> cpus;  // empty: the process's own, as the launcher bound it
  std::string note;       // how the share was made, where trainbench made it
};
// Where the launcher bound the ranks of a host apart, each keeps its own CPUs. Where several
// ranks of a host were started on the same CPUs (mpirun --bind-to none), each takes an equal
// share of their cores, in local-rank order (a core goes to several ranks only where there are
// more ranks than cores). Every rank calls it.
CpuShare rank_cpu_share(World& world);

// The report's world block at rank 0 (null elsewhere): size, ranks per node, the MPI library,
// each rank's host, CPUs (`share`'s, else the process's) and `devices` (what that rank's backends
// run on), and whether ranks on one host share CPUs.
nlohmann::json gather_world_json(World& world, const CpuShare& share,
                                 const nlohmann::json& devices);

// Folds every rank's result of one case into rank 0's: the case fails when it failed on any
// rank (the reason names the rank), and `ranks` lists each rank's status, reason and median
// time. Nothing changes at world size 1.
void gather_case_result(World& world, CaseResult* result);

}  // namespace tb
