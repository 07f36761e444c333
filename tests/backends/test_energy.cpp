// The CPU's energy counters read from fake powercap trees (a folder per zone, as
// /sys/class/powercap shows them), the allocator's tally, and the process's resident memory.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/host/energy.h"
#include "backends/host/host_info.h"
#include "backends/periodic_monitor.h"
#include "backends/registry.h"
#include "tests/scoped_env.h"
#include "tests/temp_dir.h"

namespace tb::cpu {
namespace {

namespace fs = std::filesystem;
using testing_support::ScopedEnv;
using testing_support::TempDir;

// A powercap tree under a temporary folder; zones are written as the kernel names them.
class FakePowercap {
 public:
  FakePowercap()
      : dir_("trainbench-powercap-" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  void zone(const std::string& folder, const std::string& name, std::uint64_t energy_uj,
            std::uint64_t range_uj = 262143328850) {
    const fs::path path = fs::path(dir_.path()) / folder;
    fs::create_directories(path);
    std::ofstream(path / "name") << name << "\n";
    std::ofstream(path / "max_energy_range_uj") << range_uj << "\n";
    set(folder, energy_uj);
  }
  void set(const std::string& folder, std::uint64_t energy_uj) {
    std::ofstream(fs::path(dir_.path()) / folder / "energy_uj") << energy_uj << "\n";
  }
  std::string root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

double zone_joules(const nlohmann::json& summary, const std::string& name) {
  for (const nlohmann::json& zone : summary["zones"])
    if (zone["name"] == name) return zone["energy_j"].get<double>();
  return -1;
}

TEST(PowercapEnergy, PackagesAndDramAreCountedAndNothingTwice) {
  FakePowercap tree;
  tree.zone("intel-rapl:0", "package-0", 1'000'000);
  tree.zone("intel-rapl:0:0", "core", 500'000);  // inside its package
  tree.zone("intel-rapl:0:1", "dram", 2'000'000);
  tree.zone("intel-rapl:1", "psys", 9'000'000);        // holds the packages
  tree.zone("intel-rapl-mmio:0", "package-0", 7'000);  // the same package again
  const EnergyCounters counters = find_energy_counters(tree.root());
  ASSERT_EQ(counters.zones.size(), 2u) << counters.unavailable;
  EnergyWindow window(counters);
  tree.set("intel-rapl:0", 31'000'000);    // 30 J
  tree.set("intel-rapl:0:0", 20'000'000);  // not counted
  tree.set("intel-rapl:0:1", 7'000'000);   // 5 J
  tree.set("intel-rapl:1", 99'000'000);    // not counted
  window.read();
  const nlohmann::json summary = window.summarize(2.0);
  EXPECT_EQ(summary["source"], "powercap");
  EXPECT_DOUBLE_EQ(summary["energy_j"].get<double>(), 35.0);
  EXPECT_DOUBLE_EQ(summary["power_w"]["mean"].get<double>(), 17.5);
  EXPECT_DOUBLE_EQ(zone_joules(summary, "package-0"), 30.0);
  EXPECT_DOUBLE_EQ(zone_joules(summary, "dram"), 5.0);
}

// A counter passing its range starts again from 0: the joules across the wrap are added back,
// reading after reading.
TEST(PowercapEnergy, WrapAroundIsAddedBack) {
  EXPECT_EQ(counter_delta(900, 100, 1000), 200u);
  EXPECT_EQ(counter_delta(100, 900, 1000), 800u);
  FakePowercap tree;
  const std::uint64_t range = 4'294'967'295;  // a 32-bit counter
  tree.zone("intel-rapl:0", "package-0", range - 2'000'000, range);
  EnergyWindow window(find_energy_counters(tree.root()));
  tree.set("intel-rapl:0", 3'000'000);  // 2 J to the wrap, 3 J after it
  window.read();
  tree.set("intel-rapl:0", 4'000'000);
  window.read();
  EXPECT_DOUBLE_EQ(window.summarize(1.0)["energy_j"].get<double>(), 6.0);
}

TEST(PowercapEnergy, ACounterThatDoesNotMoveGivesNoFigure) {
  FakePowercap tree;
  tree.zone("intel-rapl:0", "package-0", 123'456);
  EnergyWindow window(find_energy_counters(tree.root()));
  window.read();
  window.read();
  const nlohmann::json summary = window.summarize(3.0);
  EXPECT_FALSE(summary.contains("energy_j"));
  EXPECT_NE(summary["energy_unavailable"].get<std::string>().find("no energy counter moved"),
            std::string::npos);
}

// An unreadable counter (a folder where the file should be: root reads a mode-0400 file, so a
// permission test could not fail here) leaves no zone, and the reason names the file.
TEST(PowercapEnergy, AnUnreadableCounterSaysWhich) {
  FakePowercap tree;
  fs::create_directories(fs::path(tree.root()) / "intel-rapl:0" / "energy_uj");
  std::ofstream(fs::path(tree.root()) / "intel-rapl:0" / "name") << "package-0\n";
  std::ofstream(fs::path(tree.root()) / "intel-rapl:0" / "max_energy_range_uj") << "1000\n";
  const EnergyCounters counters = find_energy_counters(tree.root());
  EXPECT_TRUE(counters.zones.empty());
  EXPECT_NE(counters.unavailable.find("intel-rapl:0/energy_uj"), std::string::npos)
      << counters.unavailable;
  const nlohmann::json summary = EnergyWindow(counters).summarize(1.0);
  EXPECT_EQ(summary["energy_unavailable"], counters.unavailable);
}

TEST(PowercapEnergy, NoTreeSaysSo) {
  const EnergyCounters counters = find_energy_counters("/nonexistent/powercap");
  EXPECT_TRUE(counters.zones.empty());
  EXPECT_NE(counters.unavailable.find("no powercap interface"), std::string::npos);
}

// A counter that fails in the middle of a window spoils that window: no partial figure.
TEST(PowercapEnergy, ACounterLostMidWindowGivesNoFigure) {
  FakePowercap tree;
  tree.zone("intel-rapl:0", "package-0", 1'000'000);
  EnergyWindow window(find_energy_counters(tree.root()));
  fs::remove(fs::path(tree.root()) / "intel-rapl:0" / "energy_uj");
  window.read();
  const nlohmann::json summary = window.summarize(1.0);
  EXPECT_FALSE(summary.contains("energy_j"));
  EXPECT_NE(summary["energy_unavailable"].get<std::string>().find("during the case"),
            std::string::npos);
}

// The CPU backends' telemetry reads the tree TRAINBENCH_POWERCAP_ROOT names, on its own thread.
TEST(PowercapEnergy, CpuBackendTelemetryReadsTheNamedTree) {
  FakePowercap tree;
  tree.zone("intel-rapl:0", "package-0", 0);
  const ScopedEnv root(kPowercapRootVariable, tree.root().c_str());
  const BackendEntry* entry = find_backend("cpu-onednn");
  if (!entry) entry = find_backend("cpu-openblas");
  if (!entry) GTEST_SKIP() << "no CPU backend in this build";
  std::unique_ptr<Backend> backend;
  ASSERT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  std::unique_ptr<TelemetryMonitor> monitor = backend->start_telemetry();
  ASSERT_NE(monitor, nullptr);
  tree.set("intel-rapl:0", 8'000'000);
  const nlohmann::json seen = monitor->finish();
  EXPECT_EQ(seen["source"], "powercap");
  EXPECT_DOUBLE_EQ(seen["energy_j"].get<double>(), 8.0);
}

// A device whose counters cannot be read (a GPU without NVML) still gives the case an account
// of its energy: none, and why.
TEST(UnreadTelemetry, SaysWhyThereIsNoFigure) {
  const std::unique_ptr<TelemetryMonitor> monitor =
      unread_telemetry("NVML", "no NVML: libnvidia-ml.so.1 not found");
  const nlohmann::json seen = monitor->finish();
  EXPECT_EQ(seen["source"], "NVML");
  EXPECT_EQ(seen["energy_unavailable"], "no NVML: libnvidia-ml.so.1 not found");
  EXPECT_FALSE(seen.contains("energy_j"));
}

TEST(AllocationTally, PeakIsTheMostHeldSinceTheReset) {
  AllocationTally tally;
  tally.add(100);
  tally.add(50);
  tally.remove(100);
  EXPECT_EQ(tally.held(), 50u);
  EXPECT_EQ(tally.peak(), 150u);
  tally.reset_peak();
  EXPECT_EQ(tally.peak(), 50u);
  tally.add(20);
  EXPECT_EQ(tally.peak(), 70u);
}

// The CPU backend counts what it maps: a buffer of known size moves the peak by that much
// (rounded to its pages), and its release lowers what is held.
TEST(AllocationTally, CpuBackendCountsItsBuffers) {
  const BackendEntry* entry = find_backend("cpu-onednn");
  if (!entry) entry = find_backend("cpu-openblas");
  if (!entry) GTEST_SKIP() << "no CPU backend in this build";
  std::unique_ptr<Backend> backend;
  ASSERT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  backend->reset_memory_peak();
  const std::uint64_t before = backend->memory_use()->allocated_bytes;
  const std::size_t bytes = 48u << 20;
  Buffer buffer;
  ASSERT_TRUE(backend->allocate(bytes, &buffer).ok());
  const MemoryUse held = *backend->memory_use();
  EXPECT_GE(held.allocated_bytes - before, bytes);
  EXPECT_LE(held.allocated_bytes - before, bytes + (2u << 20));  // one huge page at most
  EXPECT_EQ(held.allocated_peak_bytes, held.allocated_bytes);
  backend->release(buffer);
  EXPECT_EQ(backend->memory_use()->allocated_bytes, before);
  EXPECT_EQ(backend->memory_use()->allocated_peak_bytes, held.allocated_peak_bytes);
  EXPECT_GT(held.allowance_bytes, 0u);
}

// The resident high-water mark follows a touched allocation, and a reset starts it again from
// the resident memory then. The pages are mapped and unmapped directly: a heap allocator (or
// AddressSanitizer's quarantine) may keep freed pages resident, which would hide the reset.
TEST(ResidentMemory, PeakFollowsTouchedPagesAndResets) {
  if (!reset_resident_peak()) GTEST_SKIP() << "this kernel refuses to reset VmHWM";
  const ResidentMemory start = resident_memory();
  ASSERT_GT(start.now_bytes, 0u);
  const std::size_t bytes = 64u << 20;
  void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  std::memset(pages, 1, bytes);
  const std::uint64_t touched_peak = resident_memory().peak_bytes;
  EXPECT_GE(touched_peak, start.now_bytes + (60u << 20));
  ASSERT_EQ(madvise(pages, bytes, MADV_DONTNEED), 0);
  ASSERT_EQ(munmap(pages, bytes), 0);
  // Without the pages, the process is back near its start (AddressSanitizer keeps the 8 MiB of
  // shadow its memset check touched). Where it is not, a reset could not show.
  const std::uint64_t unmapped = resident_memory().now_bytes;
  if (unmapped > start.now_bytes + (32u << 20))
    GTEST_SKIP() << fmt::format(
        "the process stayed {:.1f} MiB above its start after the pages were unmapped (from "
        "{:.1f} to {:.1f} MiB): this kernel's resident count cannot show a reset",
        (unmapped - start.now_bytes) / 1048576.0, start.now_bytes / 1048576.0,
        unmapped / 1048576.0);
  ASSERT_TRUE(reset_resident_peak());
  const std::uint64_t reset_peak = resident_memory().peak_bytes;
  EXPECT_LT(reset_peak, unmapped + (16u << 20)) << "peak " << reset_peak << ", now " << unmapped;
  EXPECT_LT(reset_peak + (32u << 20), touched_peak);
}

}  // namespace
}  // namespace tb::cpu
