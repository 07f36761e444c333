#include "dist/rank_watch.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace tb {

RankWatch::RankWatch(std::chrono::seconds timeout, int rank, int size, std::string host)
    : timeout_(timeout),
      rank_(rank),
      size_(size),
      host_(std::move(host)),
      activity_(std::make_shared<std::string>()) {}

void RankWatch::set_activity(std::string activity) {
  *activity_ = std::move(activity);
}

void RankWatch::wait(std::span<MPI_Request> requests, const char* what, bool spin) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string during = activity_->empty() ? "" : fmt::format(" during {}", *activity_);
      abort(fmt::format("waited {} s in {}{} for the other ranks: one of them died or hangs "
                        "(TRAINBENCH_RANK_TIMEOUT sets the wait)",
                        timeout_.count(), what, during),
            3);
    }
    if (spin) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void RankWatch::abort(const std::string& reason, int exit_code) const {
  std::fprintf(stderr, "trainbench: rank %d of %d (%s): %s\n", rank_, size_, host_.c_str(),
               reason.c_str());
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this says so to the compiler
}

}  // namespace tb
