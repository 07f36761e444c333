// Factories for every workload kind; each parses its descriptor (UsageError on bad input) by
// its kind's key table (workloads/keys.h), which says every key, its default and choices.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "workloads/workload.h"

namespace tb {

const WorkloadKind& gemm_kind();
std::unique_ptr<Workload> make_gemm(const Descriptor& descriptor);

const WorkloadKind& conv_kind();
std::unique_ptr<Workload> make_conv(const Descriptor& descriptor);

const WorkloadKind& stream_kind();
std::unique_ptr<Workload> make_stream(const Descriptor& descriptor, const DeviceInfo& device);

const WorkloadKind& transfer_kind();
std::unique_ptr<Workload> make_transfer(const Descriptor& descriptor);

const WorkloadKind& resnet50_train_kind();
std::unique_ptr<Workload> make_resnet50_train(const Descriptor& descriptor);
// batch=sweep: batch 1, 2, 4, ... and the largest batch whose planned step fits in
// `memory_available` on `backend` (null: unusable, one case); other descriptors unchanged.
std::vector<Descriptor> expand_resnet50_sweep(const Descriptor& descriptor, Backend* backend,
                                              std::uint64_t memory_available);

const WorkloadKind& bert_train_kind();
std::unique_ptr<Workload> make_bert_train(const Descriptor& descriptor);

const WorkloadKind& ttt_fashion_mnist_kind();
std::unique_ptr<Workload> make_ttt_fashion_mnist(const Descriptor& descriptor);
const WorkloadKind& ttt_mlm_kind();
std::unique_ptr<Workload> make_ttt_mlm(const Descriptor& descriptor);

// allreduce, reduce_scatter, allgather, broadcast (collective.cpp): one table each.
bool is_collective(std::string_view kind);
const WorkloadKind& collective_kind(std::string_view name);
std::unique_ptr<Workload> make_collective(const Descriptor& descriptor);
// sizes=MIN:MAX:xFACTOR (or :+STEP): one descriptor per size, bytes= set, as nccl-tests' -b -e
// -f (-i) sweep, of at most kMostSweepCases sizes; a descriptor without `sizes` expands to
// itself. Throws UsageError.
inline constexpr std::size_t kMostSweepCases = 1000;
std::vector<Descriptor> expand_collective_sizes(const Descriptor& descriptor);
// nccl-tests' factor from algorithm to bus bandwidth (busbw = algbw x factor) at `ranks`:
// allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1. Written once, here.
double bus_bandwidth_factor(std::string_view collective, int ranks);

const WorkloadKind& peak_kind();
std::unique_ptr<Workload> make_peak(const Descriptor& descriptor);

}  // namespace tb
