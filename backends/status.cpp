#include "backends/status.h"

#include <array>

namespace tb {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::ok:
      return "ok";
    case StatusCode::unimplemented:
      return "unimplemented";
    case StatusCode::invalid_argument:
      return "invalid_argument";
    case StatusCode::out_of_memory:
      return "out_of_memory";
    case StatusCode::unavailable:
      return "unavailable";
    case StatusCode::failed:
      return "failed";
  }
  return "unknown";
}

namespace {

constexpr std::array<std::string_view, kReasonCodes> kReasonCodeNames = {
    "none",           "not_enough_memory", "reference_kernels", "dtype_unsupported",
    "isa_lacking",    "unimplemented",     "invalid_argument",  "backend_unusable",
    "backend_broken", "library_error",     "target_missed",     "validation_failed",
    "timer_failed",   "rank_failed",       "crashed",           "child_run_failed",
    "error"};

}  // namespace

std::string_view reason_code_name(ReasonCode code) {
  return kReasonCodeNames[static_cast<std::size_t>(code)];
}

std::optional<ReasonCode> parse_reason_code(std::string_view name) {
  for (int i = 0; i < kReasonCodes; ++i)
    if (kReasonCodeNames[static_cast<std::size_t>(i)] == name) return static_cast<ReasonCode>(i);
  return std::nullopt;
}

ReasonCode default_reason_code(StatusCode code) {
  switch (code) {
    case StatusCode::ok:
      return ReasonCode::none;
    case StatusCode::unimplemented:
      return ReasonCode::unimplemented;
    case StatusCode::invalid_argument:
      return ReasonCode::invalid_argument;
    case StatusCode::out_of_memory:
      return ReasonCode::not_enough_memory;
    case StatusCode::unavailable:
      return ReasonCode::backend_unusable;
    case StatusCode::failed:
      return ReasonCode::error;  // a library's failure says so (Status::LibraryFailed)
  }
  return ReasonCode::error;
}

}  // namespace tb
