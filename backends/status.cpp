#include "backends/status.h"

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

}  // namespace tb
