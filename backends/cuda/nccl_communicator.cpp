#include "backends/cuda/nccl_communicator.h"

#include <nccl.h>

#include <fmt/format.h>

namespace tb::cuda {
namespace {

Status nccl_status(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return Status::Ok();
  return Status::LibraryFailed(fmt::format("{}: {}", what, ncclGetErrorString(result)));
}

Status nccl_type(DType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DType::f32:
      *out = ncclFloat32;
      return Status::Ok();
    case DType::bf16:
      *out = ncclBfloat16;
      return Status::Ok();
    case DType::f16:
      *out = ncclFloat16;
      return Status::Ok();
    case DType::f64:
      *out = ncclFloat64;
      return Status::Ok();
    case DType::i32:
      *out = ncclInt32;
      return Status::Ok();
    default:
      return Status::Unimplemented(fmt::format("NCCL collectives: no {} sums", dtype_name(dtype)))
          .because(ReasonCode::dtype_unsupported);
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int rank, int size,
                   std::shared_ptr<Health> health)
      : comm_(comm), stream_(stream), rank_(rank), size_(size), health_(std::move(health)) {}
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string implementation() const override { return "NCCL " + nccl_version(); }

  Status all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) override {
    ncclDataType_t type{};
    TB_RETURN_IF_ERROR(nccl_type(dtype, &type));
    return nccl_status(ncclAllReduce(send.data, recv.data, count, type, ncclSum, comm_, stream_),
                       "ncclAllReduce");
  }
  Status reduce_scatter(Buffer send, Buffer recv, std::size_t recv_count, DType dtype) override {
    ncclDataType_t type{};
    TB_RETURN_IF_ERROR(nccl_type(dtype, &type));
    return nccl_status(
        ncclReduceScatter(send.data, recv.data, recv_count, type, ncclSum, comm_, stream_),
        "ncclReduceScatter");
  }
  Status all_gather(Buffer send, Buffer recv, std::size_t send_count, DType dtype) override {
    ncclDataType_t type{};
    TB_RETURN_IF_ERROR(nccl_type(dtype, &type));
    return nccl_status(ncclAllGather(send.data, recv.data, send_count, type, comm_, stream_),
                       "ncclAllGather");
  }
  Status broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype, int root) override {
    ncclDataType_t type{};
    TB_RETURN_IF_ERROR(nccl_type(dtype, &type));
    return nccl_status(ncclBroadcast(send.data, recv.data, count, type, root, comm_, stream_),
                       "ncclBroadcast");
  }

  // NCCL progresses on the device by itself: starting is queuing, polling has nothing to do.
  Status start_all_reduce(Buffer data, std::size_t count, DType dtype) override {
    return all_reduce(data, data, count, dtype);
  }
  Status poll() override { return Status::Ok(); }
  Status wait_all() override { return synchronize(); }

  std::unique_ptr<Timer> make_timer() override {
    return std::make_unique<EventTimer>(health_, stream_);
  }
  Status synchronize() override {
    TB_RETURN_IF_ERROR(health_->check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    ncclResult_t async = ncclSuccess;
    TB_RETURN_IF_ERROR(nccl_status(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError"));
    return nccl_status(async, "NCCL collective");
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_;
  std::shared_ptr<Health> health_;
};

}  // namespace

std::string nccl_version() {
  int version = 0;
  ncclGetVersion(&version);
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

Status make_nccl_communicator(World& world, std::shared_ptr<Health> health,
                              std::unique_ptr<Communicator>* out) {
  // Rank 0's id, and whether it has one: the others wait in the broadcast either way.
  struct {
    ncclUniqueId id;
    int ok;
  } bootstrap{};
  Status made = Status::Ok();
  if (world.rank() == 0) {
    made = nccl_status(ncclGetUniqueId(&bootstrap.id), "ncclGetUniqueId");
    bootstrap.ok = made.ok();
  }
  TB_RETURN_IF_ERROR(world.broadcast_bytes(&bootstrap, sizeof(bootstrap), 0));
  if (!bootstrap.ok)
    return made.ok() ? Status::Failed("NCCL: rank 0 could not make a unique id") : made;
  // A blocking stream: it waits for the default stream's uploads before a collective reads them.
  cudaStream_t stream = nullptr;
  TB_RETURN_IF_ERROR(health->check(cudaStreamCreate(&stream), "cudaStreamCreate"));
  ncclComm_t comm = nullptr;
  if (const Status status = nccl_status(
          ncclCommInitRank(&comm, world.size(), bootstrap.id, world.rank()), "ncclCommInitRank");
      !status.ok()) {
    cudaStreamDestroy(stream);
    return status;
  }
  *out = std::make_unique<NcclCommunicator>(comm, stream, world.rank(), world.size(),
                                            std::move(health));
  return Status::Ok();
}

}  // namespace tb::cuda
