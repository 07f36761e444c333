// The collectives of one rank: every sum is its input, so they copy (or do nothing in place).
#pragma once
#include <cstring>
#include <memory>

#include "backends/communicator.h"

namespace tb {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string implementation() const override { return "single process (copy)"; }
  Status all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) override {
    return copy(send, recv, count, dtype);
  }
  Status reduce_scatter(Buffer send, Buffer recv, std::size_t recv_count, DType dtype) override {
    return copy(send, recv, recv_count, dtype);
  }
  Status all_gather(Buffer send, Buffer recv, std::size_t send_count, DType dtype) override {
    return copy(send, recv, send_count, dtype);
  }
  Status broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype, int root) override;
  Status start_all_reduce(Buffer, std::size_t, DType) override { return Status::Ok(); }
  Status poll() override { return Status::Ok(); }
  Status wait_all() override { return Status::Ok(); }

 private:
  static Status copy(Buffer send, Buffer recv, std::size_t count, DType dtype);
};

}  // namespace tb
