#include "backends/periodic_monitor.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace tb {
namespace {

class PeriodicMonitor final : public TelemetryMonitor {
 public:
  PeriodicMonitor(std::function<void()> read,
                  std::function<nlohmann::json(double seconds)> summarize, double period_s)
      : read_(std::move(read)),
        summarize_(std::move(summarize)),
        start_(std::chrono::steady_clock::now()) {
    read_();
    thread_ = std::thread([this, period = std::chrono::duration<double>(period_s)] {
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, period, [this] { return stopping_; })) read_();
    });
  }
  ~PeriodicMonitor() override { stop(); }
  nlohmann::json finish() override {
    stop();
    read_();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return summarize_(seconds);
  }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::function<void()> read_;
  std::function<nlohmann::json(double)> summarize_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<TelemetryMonitor> periodic_monitor(
    std::function<void()> read, std::function<nlohmann::json(double seconds)> summarize,
    double period_s) {
  return std::make_unique<PeriodicMonitor>(std::move(read), std::move(summarize), period_s);
}

std::unique_ptr<TelemetryMonitor> unread_telemetry(std::string source, std::string reason) {
  class Unread final : public TelemetryMonitor {
   public:
    Unread(std::string source, std::string reason)
        : source_(std::move(source)),
          reason_(std::move(reason)),
          start_(std::chrono::steady_clock::now()) {}
    nlohmann::json finish() override {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      return {{"source", source_}, {"seconds", seconds}, {"energy_unavailable", reason_}};
    }

   private:
    std::string source_, reason_;
    std::chrono::steady_clock::time_point start_;
  };
  return std::make_unique<Unread>(std::move(source), std::move(reason));
}

}  // namespace tb
