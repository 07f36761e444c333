#include "bench/ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/host/host_info.h"
#include "reports/result_record.h"

namespace tb {
namespace {

// The first line where two plans differ, for the error.
std::string first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream a(mine), b(theirs);
  std::string line_a, line_b;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a));
    const bool more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return "";
    if (line_a != line_b || more_a != more_b)
      return fmt::format("line {}: '{}' at rank 0, '{}' there", line, more_a ? line_a : "(none)",
                         more_b ? line_b : "(none)");
  }
}

// Ranks of one host whose CPU sets overlap, "" when every rank has CPUs of its own.
std::string shared_cpus(const nlohmann::json& ranks) {
  std::map<std::string, std::map<int, std::vector<int>>> owners;  // host -> cpu -> ranks
  for (const nlohmann::json& rank : ranks)
    for (int cpu : rank["cpus"]) owners[rank["host"]][cpu].push_back(rank["rank"]);
  std::set<std::string> shared;
  for (const auto& [host, cpus] : owners)
    for (const auto& [cpu, on] : cpus)
      if (on.size() > 1) shared.insert(fmt::format("ranks {} on {}", fmt::join(on, ", "), host));
  return shared.empty() ? "" : fmt::format("{} share CPUs", fmt::join(shared, "; "));
}

// Every rank's string, in rank order, on every rank.
std::vector<std::string> all_gather(World& world, const std::string& mine) {
  std::string all = nlohmann::json(world.gather(mine, 0)).dump();
  std::uint64_t bytes = all.size();
  (void)world.broadcast_bytes(&bytes, sizeof bytes, 0);
  all.resize(bytes);
  (void)world.broadcast_bytes(all.data(), bytes, 0);
  return nlohmann::json::parse(all).get<std::vector<std::string>>();
}

}  // namespace

CpuShare rank_cpu_share(World& world) {
  if (world.local_size() == 1) return {};
  const std::vector<int> mine = cpu::process_cpu_list();
  const nlohmann::json me = {
      {"host", world.host()}, {"local_rank", world.local_rank()}, {"cpus", mine}};
  int alike = 0, index = 0;  // ranks of this host started on these CPUs, and this one's place
  for (const std::string& text : all_gather(world, me.dump())) {
    const nlohmann::json other = nlohmann::json::parse(text);
    if (other["host"] != world.host() || other["cpus"].get<std::vector<int>>() != mine) continue;
    index += other["local_rank"].get<int>() < world.local_rank();
    ++alike;
  }
  if (alike <= 1) return {};
  const std::vector<cpu::CpuCore> cores = cpu::read_host_inventory().cores_allowed;
  const std::size_t ranks = static_cast<std::size_t>(alike), count = cores.size();
  const std::size_t place = static_cast<std::size_t>(index);
  // Contiguous cores (a socket's stay together); one core each when there are fewer cores.
  const std::size_t first = ranks <= count ? place * count / ranks : place % count;
  const std::size_t last = ranks <= count ? (place + 1) * count / ranks : first + 1;
  CpuShare share;
  for (std::size_t core = first; core < last; ++core)
    share.cpus.insert(share.cpus.end(), cores[core].logical_cpus.begin(),
                      cores[core].logical_cpus.end());
  std::sort(share.cpus.begin(), share.cpus.end());
  share.note = fmt::format("{} ranks on {} were started on the same {} cores; each takes a share",
                           alike, world.host(), cores.size());
  return share;
}

std::string binary_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::uint64_t hash = 14695981039346656037ull;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      hash = (hash ^ static_cast<unsigned char>(chunk[i])) * 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

void require_ranks_agree(World& world, const std::string& plan) {
  if (world.size() == 1) return;
  const std::string mine = "binary " + binary_fingerprint() + "\n" + plan;
  const std::vector<std::string> all = world.gather(mine, 0);
  for (std::size_t rank = 1; rank < all.size(); ++rank) {
    if (all[rank] == all[0]) continue;
    world.abort(fmt::format("rank {} does not run what rank 0 runs ({}): every rank must run the "
                            "same binary with the same arguments",
                            rank, first_difference(all[0], all[rank])),
                2);
  }
  (void)world.barrier();  // nobody starts before rank 0 has compared
}

nlohmann::json gather_world_json(World& world, const CpuShare& share,
                                 const nlohmann::json& devices) {
  const nlohmann::json mine = {{"rank", world.rank()},
                               {"host", world.host()},
                               {"local_rank", world.local_rank()},
                               {"cpus", share.cpus.empty() ? cpu::process_cpu_list() : share.cpus},
                               {"devices", devices}};
  const std::vector<std::string> all = world.gather(mine.dump(), 0);
  if (world.rank() != 0) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const std::string& text : all) ranks.push_back(nlohmann::json::parse(text));
  const std::string shared = shared_cpus(ranks);
  nlohmann::json nccl = nullptr;  // the NCCL rank 0's GPU backend runs, if any
  for (const nlohmann::json& device : devices)
    for (const nlohmann::json& library : device["libraries"])
      if (library["name"] == "NCCL") nccl = library["version"];
  return {{"size", world.size()},
          {"ranks_per_node", world.local_size()},
          {"launched", world.launched()},
          {"mpi", world.library()},
          {"nccl", nccl},
          {"binding", (shared.empty() ? std::string("each rank on CPUs of its own")
                                      : shared + ": bind ranks (mpirun --bind-to core or socket, "
                                                 "srun --cpu-bind=cores)") +
                          (share.note.empty() ? "" : " (" + share.note + ")")},
          {"ranks", ranks}};
}

void gather_case_result(World& world, CaseResult* result) {
  if (world.size() == 1) return;
  const nlohmann::json mine = {
      {"rank", world.rank()},
      {"host", world.host()},
      {"status", case_status_name(result->status)},
      {"reason", result->reason},
      {"reason_code", reason_code_name(result->reason_code)},
      {"median_s", result->stats ? nlohmann::json(result->stats->median) : nlohmann::json(nullptr)},
      {"validation_error",
       result->validation ? nlohmann::json(result->validation->error) : nlohmann::json(nullptr)}};
  const std::vector<std::string> all = world.gather(mine.dump(), 0);
  if (world.rank() != 0) return;
  result->ranks = nlohmann::json::array();
  for (const std::string& text : all) {
    nlohmann::json rank = nlohmann::json::parse(text);
    if (parse_case_status(rank["status"].get<std::string>()) == CaseStatus::failed &&
        result->status != CaseStatus::failed)
      result->end(CaseStatus::failed, ReasonCode::rank_failed,
                  fmt::format("rank {} ({}): {}", rank["rank"].get<int>(),
                              rank["host"].get<std::string>(), rank["reason"].get<std::string>()));
    result->ranks.push_back(std::move(rank));
  }
}

}  // namespace tb
