// A Backend that forwards every call to a real one: the base of the tests' decorators, which
// override the calls they watch or damage.
#pragma once

#include "backends/backend.h"

namespace tb::testing_support {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& real) : real_(real) {}

  std::string name() const override { return real_.name(); }
  DeviceInfo device_info() const override { return real_.device_info(); }
  Status allocate(std::size_t bytes, Buffer* out) override { return real_.allocate(bytes, out); }
  Status allocate_host(std::size_t bytes, bool pinned, Buffer* out) override {
    return real_.allocate_host(bytes, pinned, out);
  }
  void release(Buffer buffer) override { real_.release(buffer); }
  Status upload(const void* host, Buffer device, std::size_t bytes) override {
    return real_.upload(host, device, bytes);
  }
  Status download(Buffer device, void* host, std::size_t bytes) override {
    return real_.download(device, host, bytes);
  }
  void synchronize() override { real_.synchronize(); }
  Status flush_caches() override { return real_.flush_caches(); }
  std::unique_ptr<Timer> make_timer() override { return real_.make_timer(); }
  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override { return real_.plan(op, out); }
  Status import_operand(const Plan& plan, int index, const void* plain, Buffer device) override {
    return real_.import_operand(plan, index, plain, device);
  }
  Status export_operand(const Plan& plan, int index, Buffer device, void* plain) override {
    return real_.export_operand(plan, index, device, plain);
  }
  Status execute(Plan& plan, std::span<const Buffer> operands, Buffer workspace) override {
    return real_.execute(plan, operands, workspace);
  }
  std::string broken() const override { return real_.broken(); }
  Status make_communicator(World& world, std::unique_ptr<Communicator>* out) override {
    return real_.make_communicator(world, out);
  }

 protected:
  Backend& real_;
};

}  // namespace tb::testing_support
