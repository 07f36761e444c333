// Descriptor lines: every line either makes workloads whose canonical descriptors make the same
// workloads again, with sizes that fit in 64 bits, or is refused with a UsageError.
#include <cstdlib>

#include "backends/status.h"
#include "tests/fuzz/fuzz_support.h"
#include "workloads/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tb;
  DeviceInfo device;
  device.memory_bytes = std::uint64_t{16} << 30;
  try {
    for (const Descriptor& one : expand_shapes(Descriptor::parse(fuzzing::text(data, size)))) {
      const auto workload = create_workload(one, device);
      const std::string canonical = workload->descriptor().to_string();
      if (create_workload(Descriptor::parse(canonical), device)->descriptor().to_string() !=
          canonical)
        std::abort();  // the canonical descriptor must reproduce the case
      (void)workload->counts();
      (void)workload->device_bytes();
    }
  } catch (const UsageError&) {
  }
  return 0;
}
