#include "backends/host/host_plan.h"

#include "backends/operands.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace tb::cpu {
namespace {

class HostTimer final : public Timer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  void stop() override { stop_ = std::chrono::steady_clock::now(); }
  double elapsed_seconds() override {
    return std::chrono::duration<double>(stop_ - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_, stop_;
};

}  // namespace

Status CpuPlan::import_operand(int index, const void* plain_host, Buffer device) const {
  parallel_copy(device.data, plain_host, operands_.at(index).bytes);
  return Status::Ok();
}

Status CpuPlan::export_operand(int index, Buffer device, void* plain_host) const {
  parallel_copy(plain_host, device.data, operands_.at(index).bytes);
  return Status::Ok();
}

Status CpuPlan::gather_operand(int index, Buffer device, std::span<const std::int64_t> positions,
                               void* values) const {
  return gather_plain(device.data, operands_.at(index), positions, values);
}

std::unique_ptr<Timer> make_host_timer() {
  return std::make_unique<HostTimer>();
}

void parallel_copy(void* dst, const void* src, std::size_t bytes) {
  const std::int64_t chunks = static_cast<std::int64_t>((bytes + kHostPage - 1) / kHostPage);
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::size_t offset = static_cast<std::size_t>(chunk) * kHostPage;
    std::memcpy(static_cast<char*>(dst) + offset, static_cast<const char*>(src) + offset,
                std::min(kHostPage, bytes - offset));
  }
}

}  // namespace tb::cpu
