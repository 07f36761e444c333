// The cuda backend's health (a sticky error ends its GPU cases) and its event timer, shared by
// the backend and its NCCL communicator.
#pragma once

#include <cuda_runtime_api.h>

#include <limits>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"

namespace tb::cuda {

// What the backend knows about its context: healthy, or broken by a sticky error (then every
// later GPU case is skipped with this reason instead of failing one by one).
struct Health {
  std::string broken;  // empty while healthy
  // Notes a sticky error (the first one names the call that saw it).
  void record(cudaError_t error, const char* what) {
    if (is_sticky(error) && broken.empty())
      broken = fmt::format("{} failed with a sticky error ({}): GPU cases stop here", what,
                           cudaGetErrorString(error));
  }
  // Records it and returns the status for the call that saw it.
  Status check(cudaError_t error, const char* what) {
    record(error, what);
    return cuda_status(error, what);
  }
};

// Times device work with events recorded on `stream` (the default stream, where the backend's
// plans run, or a communicator's own); an error while waiting is recorded in the backend's
// health (a timer returns seconds only) and the time is NaN.
class EventTimer final : public Timer {
 public:
  explicit EventTimer(std::shared_ptr<Health> health, cudaStream_t stream = nullptr)
      : health_(std::move(health)), stream_(stream) {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~EventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() override { failed_ = cudaEventRecord(start_, stream_) != cudaSuccess; }
  // Recorded right after the last launch: the host's wait comes after, outside the sample.
  void stop() override { note(cudaEventRecord(stop_, stream_)); }
  double elapsed_seconds() override {
    float ms = 0;
    note(cudaEventSynchronize(stop_));
    if (!failed_) note(cudaEventElapsedTime(&ms, start_, stop_));
    return failed_ ? std::numeric_limits<double>::quiet_NaN() : ms * 1e-3;
  }

 private:
  void note(cudaError_t error) {
    if (error == cudaSuccess) return;
    health_->record(error, "CUDA event timing");
    failed_ = true;
  }

  std::shared_ptr<Health> health_;
  cudaStream_t stream_;
  cudaEvent_t start_{}, stop_{};
  bool failed_ = false;  // a sample that failed reads NaN, never 0
};

}  // namespace tb::cuda
