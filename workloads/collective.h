// What other code needs of the collective kinds (allreduce, reduce_scatter, allgather,
// broadcast; collective.cpp).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "workloads/descriptor.h"

namespace tb {

// sizes=MIN:MAX:xFACTOR (or :+STEP): one descriptor per size, bytes= set, as nccl-tests' -b -e
// -f (-i) sweep, of at most kMostSweepCases sizes; a descriptor without `sizes` expands to
// itself. Throws UsageError.
inline constexpr std::size_t kMostSweepCases = 1000;
std::vector<Descriptor> expand_collective_sizes(const Descriptor& descriptor);
// nccl-tests' factor from algorithm to bus bandwidth (busbw = algbw x factor) at `ranks`:
// allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1. Written once, here.
double bus_bandwidth_factor(std::string_view collective, int ranks);

}  // namespace tb
