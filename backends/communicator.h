// The processes of a run and the collectives between them. The interfaces live in the base so
// that a backend can offer collectives on its own memory without knowing how the processes were
// launched: dist/ implements World over MPI (one process per rank under mpirun or srun) and as
// a single process; a CPU backend's communicator is MPI on host memory, cuda's is NCCL on device
// memory, bootstrapped through World::broadcast_bytes.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace tb {

// Sums across every rank, on buffers of the backend that made the communicator. Counts are in
// elements of `dtype`, as NCCL counts them: all_reduce and broadcast move `count` elements;
// reduce_scatter's receive buffer holds `recv_count` (the send buffer size() times that);
// all_gather's send buffer holds `send_count` (the receive buffer size() times that). A send
// buffer that is the receive buffer (same data pointer; for reduce_scatter and all_gather, the
// rank's own chunk of the larger one) is in place.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What runs: "MPI_Allreduce (Open MPI 4.1.4)", "NCCL 2.27.3", "single process (copy)".
  virtual std::string implementation() const = 0;

  virtual Status all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) = 0;
  virtual Status reduce_scatter(Buffer send, Buffer recv, std::size_t recv_count, DType dtype) = 0;
  virtual Status all_gather(Buffer send, Buffer recv, std::size_t send_count, DType dtype) = 0;
  virtual Status broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype, int root) = 0;

  // A sum all-reduce in place that returns at once (data-parallel gradient buckets reduced
  // while backward runs). poll() lets the started ones progress without blocking (MPI makes
  // progress only inside its calls on CPU); wait_all() returns when every started one is done.
  virtual Status start_all_reduce(Buffer data, std::size_t count, DType dtype) = 0;
  virtual Status poll() = 0;
  virtual Status wait_all() = 0;

  // On a device the collectives above are queued in order on the communicator's own stream
  // and may return before they finish: make_timer() times that stream (events on it), and
  // synchronize() waits for what was queued. Null and nothing to wait for on host memory,
  // where a call returns when its work is done and the backend's host clock times it.
  virtual std::unique_ptr<Timer> make_timer() { return nullptr; }
  virtual Status synchronize() { return Status::Ok(); }
};

// The ranks of a run: MPI_COMM_WORLD under a launcher, one process otherwise. Host-side
// exchanges of small values for the runner (agreement checks, gathering results at rank 0) and
// for bootstrapping device communicators.
class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this host
  virtual int local_size() const = 0;
  virtual std::string host() const = 0;
  // False for a process started without a launcher (one rank, no MPI).
  virtual bool launched() const = 0;
  // "Open MPI v4.1.4, ..." (MPI_Get_library_version), or why there is none.
  virtual std::string library() const = 0;

  virtual Status broadcast_bytes(void* data, std::size_t bytes, int root) = 0;
  // Every rank's string, in rank order, at `root`; empty elsewhere.
  virtual std::vector<std::string> gather(const std::string& mine, int root) = 0;
  virtual double max(double value) = 0;  // over every rank, on every rank
  virtual double sum(double value) = 0;  // the same, summed
  virtual Status barrier() = 0;
  // Ends every rank (MPI_Abort) after printing `reason` on this one.
  [[noreturn]] virtual void abort(const std::string& reason, int exit_code) = 0;
  // What this rank is doing now ("case 2 of 5: ..."): a wait on the others that runs out of
  // time names it.
  virtual void set_activity(std::string activity) { (void)activity; }

  // Collectives on host memory between these ranks (MPI; a copy at size 1).
  virtual std::unique_ptr<Communicator> host_communicator() = 0;
};

}  // namespace tb
