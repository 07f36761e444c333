// Collectives over MPI on host memory: the CPU backends' communicator. f32, f64 and i32 sum
// with MPI's own types; bf16 and f16 (which MPI lacks) through user-defined sums that add in
// f32 and round to nearest even, as NCCL does.
#pragma once
#include <mpi.h>

#include <vector>

#include "backends/communicator.h"
#include "dist/rank_watch.h"

namespace tb {

class MpiCommunicator final : public Communicator {
 public:
  // Takes a duplicate of `comm`, so its traffic cannot match the World's own exchanges; waits
  // for started all-reduces under `watch`'s deadline.
  MpiCommunicator(MPI_Comm comm, std::string library, RankWatch watch);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string implementation() const override;

  Status all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) override;
  Status reduce_scatter(Buffer send, Buffer recv, std::size_t recv_count, DType dtype) override;
  Status all_gather(Buffer send, Buffer recv, std::size_t send_count, DType dtype) override;
  Status broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype, int root) override;
  Status start_all_reduce(Buffer data, std::size_t count, DType dtype) override;
  Status poll() override;
  Status wait_all() override;

 private:
  struct Type {
    MPI_Datatype datatype;
    MPI_Op sum;
  };
  // MPI's type and sum for `dtype`, or an error for one it cannot sum.
  Status type_of(DType dtype, Type* out) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::string library_;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  MPI_Op f16_sum_ = MPI_OP_NULL;
  std::vector<MPI_Request> pending_;
  RankWatch watch_;
};

}  // namespace tb
