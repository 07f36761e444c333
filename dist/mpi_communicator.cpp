#include "dist/mpi_communicator.h"

#include <fmt/format.h>

#include <climits>

#include "backends/low_precision.h"

namespace tb {
namespace {

template <float (*to_float)(std::uint16_t), std::uint16_t (*from_float)(float)>
void sum_16_bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = from_float(to_float(a[i]) + to_float(b[i]));
}

Status mpi_status(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Status::LibraryFailed(fmt::format("{} failed: {}", call, text));
}

// MPI counts are ints: a larger collective is refused rather than truncated.
Status checked_count(std::size_t count, int* out) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    return Status::InvalidArgument(fmt::format("{} elements exceed MPI's int count", count));
  }
  *out = static_cast<int>(count);
  return Status::Ok();
}

Status check_fits(const Buffer& buffer, std::size_t bytes, const char* which) {
  if (buffer.bytes >= bytes) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "the {} buffer holds {} bytes, the collective needs {}", which, buffer.bytes, bytes));
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string library, RankWatch watch)
    : library_(std::move(library)), watch_(std::move(watch)) {
  {
    const auto blocked = watch_.blocking("MPI_Comm_dup");
    MPI_Comm_dup(comm, &comm_);
  }
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Op_create(&sum_16_bit<cpu::bf16_to_float, cpu::float_to_bf16>, 1, &bf16_sum_);
  MPI_Op_create(&sum_16_bit<cpu::f16_to_float, cpu::float_to_f16>, 1, &f16_sum_);
}

MpiCommunicator::~MpiCommunicator() {
  if (!pending_.empty()) watch_.wait(pending_, "the gradient all-reduces (MPI_Iallreduce)", false);
  MPI_Op_free(&bf16_sum_);
  MPI_Op_free(&f16_sum_);
  MPI_Comm_free(&comm_);
}

std::string MpiCommunicator::implementation() const {
  return "MPI (" + library_ + ")";
}

Status MpiCommunicator::type_of(DType dtype, Type* out) const {
  switch (dtype) {
    case DType::f32:
      *out = {MPI_FLOAT, MPI_SUM};
      return Status::Ok();
    case DType::f64:
      *out = {MPI_DOUBLE, MPI_SUM};
      return Status::Ok();
    case DType::i32:
      *out = {MPI_INT32_T, MPI_SUM};
      return Status::Ok();
    case DType::bf16:
      *out = {MPI_UINT16_T, bf16_sum_};
      return Status::Ok();
    case DType::f16:
      *out = {MPI_UINT16_T, f16_sum_};
      return Status::Ok();
    default:
      return Status::Unimplemented(fmt::format("MPI collectives in {}", dtype_name(dtype)))
          .because(ReasonCode::dtype_unsupported);
  }
}

Status MpiCommunicator::all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) {
  Type type;
  int n = 0;
  const std::size_t bytes = count * dtype_size(dtype);
  for (Status s : {type_of(dtype, &type), checked_count(count, &n), check_fits(send, bytes, "send"),
                   check_fits(recv, bytes, "receive")}) {
    if (!s.ok()) return s;
  }
  const void* source = send.data == recv.data ? MPI_IN_PLACE : send.data;
  const auto blocked = watch_.blocking("MPI_Allreduce");
  return mpi_status(MPI_Allreduce(source, recv.data, n, type.datatype, type.sum, comm_),
                    "MPI_Allreduce");
}

Status MpiCommunicator::reduce_scatter(Buffer send, Buffer recv, std::size_t recv_count,
                                       DType dtype) {
  Type type;
  int n = 0;
  const std::size_t bytes = recv_count * dtype_size(dtype);
  for (Status s : {type_of(dtype, &type), checked_count(recv_count * size_, &n),
                   check_fits(send, bytes * size_, "send"), check_fits(recv, bytes, "receive")}) {
    if (!s.ok()) return s;
  }
  // In place: the receive buffer is this rank's chunk of the send buffer (NCCL's convention);
  // MPI's in-place form reads and writes the whole send buffer, so the chunk is moved after.
  const bool in_place = static_cast<char*>(send.data) + rank_ * bytes == recv.data;
  const auto blocked = watch_.blocking("MPI_Reduce_scatter_block");
  const int code =
      in_place ? MPI_Reduce_scatter_block(MPI_IN_PLACE, send.data, static_cast<int>(recv_count),
                                          type.datatype, type.sum, comm_)
               : MPI_Reduce_scatter_block(send.data, recv.data, static_cast<int>(recv_count),
                                          type.datatype, type.sum, comm_);
  if (in_place && code == MPI_SUCCESS && rank_ != 0) std::memmove(recv.data, send.data, bytes);
  return mpi_status(code, "MPI_Reduce_scatter_block");
}

Status MpiCommunicator::all_gather(Buffer send, Buffer recv, std::size_t send_count, DType dtype) {
  Type type;
  int n = 0;
  const std::size_t bytes = send_count * dtype_size(dtype);
  for (Status s : {type_of(dtype, &type), checked_count(send_count * size_, &n),
                   check_fits(send, bytes, "send"), check_fits(recv, bytes * size_, "receive")}) {
    if (!s.ok()) return s;
  }
  const bool in_place = static_cast<char*>(recv.data) + rank_ * bytes == send.data;
  const void* source = in_place ? MPI_IN_PLACE : send.data;
  const auto blocked = watch_.blocking("MPI_Allgather");
  return mpi_status(MPI_Allgather(source, static_cast<int>(send_count), type.datatype, recv.data,
                                  static_cast<int>(send_count), type.datatype, comm_),
                    "MPI_Allgather");
}

Status MpiCommunicator::broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype,
                                  int root) {
  Type type;
  int n = 0;
  const std::size_t bytes = count * dtype_size(dtype);
  for (Status s :
       {type_of(dtype, &type), checked_count(count, &n), check_fits(recv, bytes, "receive")}) {
    if (!s.ok()) return s;
  }
  if (root < 0 || root >= size_) {
    return Status::InvalidArgument(fmt::format("broadcast root {} of {} ranks", root, size_));
  }
  // NCCL's out-of-place broadcast sends from the root's send buffer into every receive buffer.
  if (rank_ == root && send.data != recv.data) {
    if (Status s = check_fits(send, bytes, "send"); !s.ok()) return s;
    std::memcpy(recv.data, send.data, bytes);
  }
  const auto blocked = watch_.blocking("MPI_Bcast");
  return mpi_status(MPI_Bcast(recv.data, n, type.datatype, root, comm_), "MPI_Bcast");
}

Status MpiCommunicator::start_all_reduce(Buffer data, std::size_t count, DType dtype) {
  Type type;
  int n = 0;
  for (Status s : {type_of(dtype, &type), checked_count(count, &n),
                   check_fits(data, count * dtype_size(dtype), "bucket")}) {
    if (!s.ok()) return s;
  }
  MPI_Request request;
  const int code =
      MPI_Iallreduce(MPI_IN_PLACE, data.data, n, type.datatype, type.sum, comm_, &request);
  if (code == MPI_SUCCESS) pending_.push_back(request);
  return mpi_status(code, "MPI_Iallreduce");
}

Status MpiCommunicator::poll() {
  if (pending_.empty()) return Status::Ok();
  int done = 0;
  const int code =
      MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE);
  if (code == MPI_SUCCESS && done) pending_.clear();
  return mpi_status(code, "MPI_Testall");
}

Status MpiCommunicator::wait_all() {
  if (pending_.empty()) return Status::Ok();
  // Spinning as MPI_Waitall would, but under the rank timeout: a peer that stopped must not
  // hold this rank for ever inside a gradient exchange.
  watch_.wait(pending_, "the gradient all-reduces (MPI_Iallreduce)", /*spin=*/true);
  pending_.clear();
  return Status::Ok();
}

}  // namespace tb
