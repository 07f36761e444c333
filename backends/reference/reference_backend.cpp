#include "backends/reference/reference_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "backends/host/host_plan.h"
#include "backends/reference/reference_products.h"

namespace tb::cpu {
namespace {

class HostReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "host reference"; }
  DeviceInfo device_info() const override {
    DeviceInfo info;
    info.kind = "cpu";
    info.model = "shared CPU code in f64";
    return info;
  }
  Status allocate(std::size_t bytes, Buffer* out) override {
    void* data = std::calloc(std::max<std::size_t>(bytes, 1), 1);
    if (!data)
      return Status::OutOfMemory(fmt::format("cannot allocate {:.2f} GiB for the f64 reference",
                                             static_cast<double>(bytes) / (1 << 30)));
    *out = Buffer{data, bytes};
    return Status::Ok();
  }
  Status allocate_host(std::size_t bytes, bool, Buffer* out) override {
    TB_RETURN_IF_ERROR(allocate(bytes, out));
    out->kind = MemoryKind::host_pageable;
    return Status::Ok();
  }
  void release(Buffer buffer) override { std::free(buffer.data); }
  Status upload(const void* host, Buffer device, std::size_t bytes) override {
    if (bytes > device.bytes) return Status::InvalidArgument("upload larger than the buffer");
    std::memcpy(device.data, host, bytes);
    return Status::Ok();
  }
  Status download(Buffer device, void* host, std::size_t bytes) override {
    if (bytes > device.bytes) return Status::InvalidArgument("download larger than the buffer");
    std::memcpy(host, device.data, bytes);
    return Status::Ok();
  }
  void synchronize() override {}
  Status flush_caches() override { return Status::Ok(); }
  std::unique_ptr<Timer> make_timer() override { return make_host_timer(); }
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    return plan_host_op(op, out);
  }
  Status import_operand(const Plan& plan, int index, const void* plain_host,
                        Buffer device) override {
    return static_cast<const CpuPlan&>(plan).import_operand(index, plain_host, device);
  }
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain_host) override {
    return static_cast<const CpuPlan&>(plan).export_operand(index, device, plain_host);
  }
  Status gather_operand(const Plan& plan, int index, Buffer device,
                        std::span<const std::int64_t> positions, void* values) override {
    return static_cast<const CpuPlan&>(plan).gather_operand(index, device, positions, values);
  }
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    return static_cast<CpuPlan&>(plan).run(operands, workspace);
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_reference_backend() {
  return std::make_unique<HostReferenceBackend>();
}

}  // namespace tb::cpu
