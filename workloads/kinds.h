// Factories for every workload kind; each parses its descriptor (UsageError on bad input) by
// its kind's key table (workloads/keys.h), which says every key, its default and choices.
#pragma once

#include <memory>

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

const WorkloadKind& peak_kind();
std::unique_ptr<Workload> make_peak(const Descriptor& descriptor);

}  // namespace tb
