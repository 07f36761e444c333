// Status: how every backend and workload call reports failure without aborting.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tb {

enum class StatusCode { ok, unimplemented, invalid_argument, out_of_memory, unavailable, failed };

std::string_view status_code_name(StatusCode code);

// Why a case did not pass, as a closed set next to the free-text reason: what `check` and
// `compare` key on, and what reports record as "reason_code". The names are the schema's.
enum class ReasonCode {
  none,               // passed
  not_enough_memory,  // the case needs more memory than the host or device has (skipped)
  reference_kernels,  // it would time reference kernels, refused without the flag
  dtype_unsupported,  // the backend has no path for the dtype
  isa_lacking,        // the CPU (or its ISA cap) lacks the instructions the case needs
  unimplemented,      // the backend has no implementation of an op or shape
  invalid_argument,   // the case is malformed for this backend
  backend_unusable,   // the backend cannot run on this machine
  backend_broken,     // the backend broke during this or an earlier case
  library_error,      // the library or device call failed
  target_missed,      // a time-to-train run did not reach its quality target in its epochs
  validation_failed,  // the result was wrong
  timer_failed,       // the timer read no positive, finite time
  rank_failed,        // another rank failed the case
  crashed,            // the process died of a fatal signal in the case
  child_run_failed,   // a child run (--child-env) gave no report
  error,              // a failure or exception trainbench did not classify further
};
inline constexpr int kReasonCodes = static_cast<int>(ReasonCode::error) + 1;
std::string_view reason_code_name(ReasonCode code);
std::optional<ReasonCode> parse_reason_code(std::string_view name);
// The code a status of this kind has unless its site names a finer one.
ReasonCode default_reason_code(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), reason_code_(default_reason_code(code)), message_(std::move(message)) {}
  static Status Ok() { return {}; }
  static Status Unimplemented(std::string m) { return {StatusCode::unimplemented, std::move(m)}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::invalid_argument, std::move(m)};
  }
  static Status OutOfMemory(std::string m) { return {StatusCode::out_of_memory, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::unavailable, std::move(m)}; }
  static Status Failed(std::string m) { return {StatusCode::failed, std::move(m)}; }
  // A call into a library or the device that failed (never trainbench's own failures).
  static Status LibraryFailed(std::string m) {
    return Failed(std::move(m)).because(ReasonCode::library_error);
  }

  // The same status with a finer reason: Status::Unimplemented(m).because(ReasonCode::isa_lacking).
  Status because(ReasonCode reason) && {
    reason_code_ = reason;
    return std::move(*this);
  }

  // The same status, its message said where: "conv1 (conv): " + message.
  Status with_prefix(std::string_view prefix) const {
    Status out = *this;
    out.message_.insert(0, prefix);
    return out;
  }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  ReasonCode reason_code() const { return reason_code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::ok;
  ReasonCode reason_code_ = ReasonCode::none;
  std::string message_;
};

// A mistake in what the user asked for (unknown name, malformed descriptor): exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tb

// Return early from a function returning Status when a call fails.
#define TB_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::tb::Status tb_status_ = (expr);        \
    if (!tb_status_.ok()) return tb_status_; \
  } while (0)
