// Status: how every backend and workload call reports failure without aborting.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace tb {

enum class StatusCode { ok, unimplemented, invalid_argument, out_of_memory, unavailable, failed };

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }
  static Status Unimplemented(std::string m) { return {StatusCode::unimplemented, std::move(m)}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::invalid_argument, std::move(m)};
  }
  static Status OutOfMemory(std::string m) { return {StatusCode::out_of_memory, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::unavailable, std::move(m)}; }
  static Status Failed(std::string m) { return {StatusCode::failed, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::ok;
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
