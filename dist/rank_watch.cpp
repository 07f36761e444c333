#include "dist/rank_watch.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace tb {

// The state every copy of a RankWatch shares, and the watchdog thread of blocking calls.
struct RankWatch::Blocking::Shared {
  Shared(std::chrono::seconds timeout, int rank, int size, std::string host)
      : timeout(timeout), rank(rank), size(size), host(std::move(host)) {}
  ~Shared() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    stop.notify_one();
    if (watchdog.joinable()) watchdog.join();
  }

  // "rank 0 of 2 (host): waited 5 s in MPI_Allreduce during case 2 of 5: ...: ...".
  std::string timed_out(const char* what) {
    std::lock_guard lock(mutex);
    const std::string during = activity.empty() ? "" : fmt::format(" during {}", activity);
    return fmt::format(
        "rank {} of {} ({}): waited {} s in {}{} for the other ranks: one of them died or hangs "
        "(TRAINBENCH_RANK_TIMEOUT sets the wait)",
        rank, size, host, timeout.count(), what, during);
  }

  // Checks the blocking call under way ten times per timeout (at most once a second).
  void watch() {
    const auto period = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(timeout) / 10,
                                                            std::chrono::seconds(1));
    std::unique_lock lock(mutex);
    while (!stop.wait_for(lock, period, [this] { return stopping; })) {
      const char* what = blocked_in.load(std::memory_order_acquire);
      if (!what || std::chrono::steady_clock::now().time_since_epoch().count() <
                       deadline.load(std::memory_order_relaxed))
        continue;
      lock.unlock();
      std::fprintf(stderr, "trainbench: %s\n", timed_out(what).c_str());
      std::fflush(nullptr);
      std::_Exit(3);
    }
  }

  const std::chrono::seconds timeout;
  const int rank, size;
  const std::string host;
  std::mutex mutex;
  std::condition_variable stop;
  bool stopping = false;  // under mutex
  std::string activity;   // under mutex
  std::atomic<const char*> blocked_in{nullptr};
  std::atomic<std::chrono::steady_clock::rep> deadline{0};
  std::once_flag started;
  std::thread watchdog;
};

RankWatch::RankWatch(std::chrono::seconds timeout, int rank, int size, std::string host)
    : shared_(std::make_shared<Blocking::Shared>(timeout, rank, size, std::move(host))) {}

void RankWatch::set_activity(std::string activity) {
  std::lock_guard lock(shared_->mutex);
  shared_->activity = std::move(activity);
}

void RankWatch::wait(std::span<MPI_Request> requests, const char* what, bool spin) const {
  const auto deadline = std::chrono::steady_clock::now() + shared_->timeout;
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "trainbench: %s\n", shared_->timed_out(what).c_str());
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 3);
      std::_Exit(3);
    }
    if (spin) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

RankWatch::Blocking RankWatch::blocking(const char* what) const {
  Blocking::Shared& shared = *shared_;
  std::call_once(shared.started, [&] { shared.watchdog = std::thread([&] { shared.watch(); }); });
  shared.deadline.store(
      (std::chrono::steady_clock::now() + shared.timeout).time_since_epoch().count(),
      std::memory_order_relaxed);
  shared.blocked_in.store(what, std::memory_order_release);
  return Blocking(shared);
}

RankWatch::Blocking::~Blocking() {
  shared_.blocked_in.store(nullptr, std::memory_order_release);
}

void RankWatch::abort(const std::string& reason, int exit_code) const {
  std::fprintf(stderr, "trainbench: rank %d of %d (%s): %s\n", shared_->rank, shared_->size,
               shared_->host.c_str(), reason.c_str());
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this says so to the compiler
}

}  // namespace tb
