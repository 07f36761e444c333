// How long a rank waits for the others, and what it says when they do not come: every wait on
// another rank (the World's host-side exchanges, a communicator's collectives, its started
// all-reduces) runs under one deadline and, past it, ends the job with one line naming this
// rank, its host, the case it was running and the call it waited in.
#pragma once
#include <mpi.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>

namespace tb {

class RankWatch {
 public:
  RankWatch(std::chrono::seconds timeout, int rank, int size, std::string host);

  // What this rank is doing ("case 2 of 5: bert-train ... on cpu-onednn"), for the line above.
  void set_activity(std::string activity);

  // Returns when every request is done. `spin`: test without pause (a wait inside a timed step,
  // as MPI's own blocking wait spins); otherwise sleep between tests, up to 1 ms, so a rank
  // sharing a core with the one it waits for does not take its time.
  void wait(std::span<MPI_Request> requests, const char* what, bool spin) const;

  // While one lives, this thread is inside the blocking MPI call `what` (a collective measured
  // as MPI runs it, not through its slower non-blocking form). Past the deadline a watchdog
  // thread prints the line and ends this process with exit 3 (it makes no MPI call: MPI may
  // be entered by one thread only), and the launcher then ends the other ranks. Costs two
  // atomic stores.
  class Blocking {
   public:
    ~Blocking();
    Blocking(const Blocking&) = delete;
    Blocking& operator=(const Blocking&) = delete;

   private:
    friend class RankWatch;
    struct Shared;
    explicit Blocking(Shared& shared) : shared_(shared) {}
    Shared& shared_;
  };
  Blocking blocking(const char* what) const;

  // Prints `reason` with this rank's name on stderr and ends every rank (MPI_Abort).
  [[noreturn]] void abort(const std::string& reason, int exit_code) const;

 private:
  std::shared_ptr<Blocking::Shared> shared_;  // shared with the copies communicators hold
};

}  // namespace tb
