// Backend registry: name -> factory. CMake decides which backends are compiled in; the user
// picks among them at run time, so one run can compare CPU and GPU backends.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace tb {

enum class PinPolicy { cores, none };

struct BackendConfig {
  int threads = 0;  // 0: one thread per physical core available to the process
  PinPolicy pin = PinPolicy::cores;
  int device = 0;  // the GPU a GPU backend drives: a rank's local rank under a launcher
  // The CPUs a CPU backend may use; empty: the process's. Ranks of one host started on the same
  // CPUs get a share each (bench/ranks.h).
  std::vector<int> cpus = {};
};

struct Availability {
  bool usable = false;
  std::string reason;  // why not, when not usable
};

struct BackendEntry {
  std::string name;
  std::string description;
  Availability (*probe)();
  Status (*create)(const BackendConfig& config, std::unique_ptr<Backend>* out);
};

// Every backend compiled into this binary, usable here or not.
const std::vector<BackendEntry>& backend_registry();
// nullptr for a name this binary does not know.
const BackendEntry* find_backend(std::string_view name);

// The double-precision reference every check compares with: the shared CPU code in f64 on
// host memory, whatever device the checked step runs on. Not in backend_registry() (it is no
// backend to benchmark).
std::unique_ptr<Backend> make_reference_backend();

PinPolicy parse_pin_policy(std::string_view name);  // throws UsageError
std::string_view pin_policy_name(PinPolicy pin);

}  // namespace tb
