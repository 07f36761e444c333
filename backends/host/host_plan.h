// How a plan runs on the host, for the CPU backends and the f64 reference alike: a plan over
// host buffers, the steady-clock timer and the page-parallel copy.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "backends/backend.h"

namespace tb::cpu {

// A plan that runs on the host. Operands are in their plain layout unless the plan overrides
// the import / export conversions.
class CpuPlan : public Plan {
 public:
  virtual Status run(std::span<const Buffer> operands, Buffer workspace) = 0;
  virtual Status import_operand(int index, const void* plain_host, Buffer device) const;
  virtual Status export_operand(int index, Buffer device, void* plain_host) const;
  // Backend::gather_operand: read in place from a plain operand.
  virtual Status gather_operand(int index, Buffer device, std::span<const std::int64_t> positions,
                                void* values) const;
};

// Wall-clock time on the host's steady clock.
std::unique_ptr<Timer> make_host_timer();

// Parallel copy with the same static partition as the first touch, so each thread copies
// the pages it owns.
void parallel_copy(void* dst, const void* src, std::size_t bytes);

// The first-touch and copy stride.
inline constexpr std::size_t kHostPage = 4096;

}  // namespace tb::cpu
