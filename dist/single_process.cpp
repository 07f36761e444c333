#include "dist/single_process.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "dist/world.h"

namespace tb {

Status SingleProcessCommunicator::broadcast(Buffer send, Buffer recv, std::size_t count,
                                            DType dtype, int root) {
  if (root != 0)
    return Status::InvalidArgument("broadcast root " + std::to_string(root) + " of 1 rank");
  return copy(send, recv, count, dtype);
}

Status SingleProcessCommunicator::copy(Buffer send, Buffer recv, std::size_t count, DType dtype) {
  const std::size_t bytes = count * dtype_size(dtype);
  if (send.bytes < bytes || recv.bytes < bytes) {
    return Status::InvalidArgument("collective of " + std::to_string(bytes) + " bytes on a " +
                                   std::to_string(std::min(send.bytes, recv.bytes)) +
                                   "-byte buffer");
  }
  if (send.data != recv.data) std::memcpy(recv.data, send.data, bytes);
  return Status::Ok();
}

namespace {

class SingleProcessWorld final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string host() const override {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
  }
  bool launched() const override { return false; }
  std::string library() const override { return "none (one process, started without a launcher)"; }
  Status broadcast_bytes(void*, std::size_t, int root) override {
    return root == 0 ? Status::Ok() : Status::InvalidArgument("broadcast root of 1 rank");
  }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    return root == 0 ? std::vector<std::string>{mine} : std::vector<std::string>{};
  }
  double max(double value) override { return value; }
  double sum(double value) override { return value; }
  Status barrier() override { return Status::Ok(); }
  [[noreturn]] void abort(const std::string& reason, int exit_code) override {
    std::fprintf(stderr, "trainbench: %s\n", reason.c_str());
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  std::unique_ptr<Communicator> host_communicator() override {
    return std::make_unique<SingleProcessCommunicator>();
  }
};

}  // namespace

std::unique_ptr<World> make_single_process_world() {
  return std::make_unique<SingleProcessWorld>();
}

std::string detected_launcher() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) return "Open MPI";
  if (std::getenv("PMIX_RANK")) return "PMIx";
  if (std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_NUM_TASKS")) return "Slurm";
  if (std::getenv("PMI_RANK")) return "PMI";
  return "";
}

}  // namespace tb
