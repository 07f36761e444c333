// The ranks of a `trainbench run` (one process per rank under mpirun or srun, one rank
// otherwise): what they must agree on before the first case, the report's world block, and one
// case's results from every rank folded into the result rank 0 writes.
#pragma once
#include <string>

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

// The report's world block at rank 0 (null elsewhere): size, ranks per node, the MPI library,
// each rank's host, CPUs and `devices` (what that rank's backends run on), and whether ranks on
// one host share CPUs.
nlohmann::json gather_world_json(World& world, const nlohmann::json& devices);

// Folds every rank's result of one case into rank 0's: the case fails when it failed on any
// rank (the reason names the rank), and `ranks` lists each rank's status, reason and median
// time. Nothing changes at world size 1.
void gather_case_result(World& world, CaseResult* result);

}  // namespace tb
