// The collective workloads (workloads/collective.cpp) on a CPU backend's MPI communicator: every
// kind, dtype and placement validates exactly at sizes that split unevenly into chunks and
// elements; a damaged element on one rank fails the case on every rank; sizes that cannot be
// split are refused with one line; times are the slowest rank's, bandwidths nccl-tests'.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "backends/registry.h"
#include "tests/dist/world_fixture.h"
#include "tests/forwarding_backend.h"
#include "workloads/collective.h"
#include "workloads/registry.h"

namespace tb {
namespace {

std::unique_ptr<Backend> cpu_backend() {
  for (const char* name : {"cpu-onednn", "cpu-openblas"}) {
    const BackendEntry* entry = find_backend(name);
    if (!entry || !entry->probe().usable) continue;
    std::unique_ptr<Backend> backend;
    BackendConfig config;
    config.threads = 1;  // ranks share this machine's cores
    if (entry->create(config, &backend).ok()) return backend;
  }
  return nullptr;
}

std::unique_ptr<Workload> collective(const std::string& line) {
  std::unique_ptr<Workload> workload = create_workload(Descriptor::parse(line), DeviceInfo{});
  workload->join(test::world());
  return workload;
}

// Element counts (f32 here; halved for 16-bit dtypes, so counts stay whole) that are a
// multiple of the ranks but not a power of two; the largest spans two fill chunks and a part.
const std::int64_t kSizes[] = {8 * 2, 4 * 2 * 1501, 4 * 2 * ((1 << 20) + 3)};

TEST(CollectiveWorkloads, EveryKindDtypeAndPlacementIsExactOnEveryRank) {
  std::unique_ptr<Backend> backend = cpu_backend();
  ASSERT_TRUE(backend) << "no CPU backend";
  for (const char* kind : {"allreduce", "reduce_scatter", "allgather", "broadcast"})
    for (const char* dtype : {"f32", "bf16", "f16"})
      for (const char* inplace : {"0", "1"})
        for (std::int64_t bytes : kSizes) {
          const std::int64_t scaled = std::string(dtype) == "f32" ? bytes : bytes / 2;
          const std::string line = fmt::format("{} bytes={} dtype={} inplace={}", kind,
                                               scaled * test::world().size(), dtype, inplace);
          std::unique_ptr<Workload> workload = collective(line);
          ASSERT_TRUE(workload->setup(*backend, 42).ok()) << line;
          const Validation validation = workload->validate();
          EXPECT_TRUE(validation.passed) << line << ": " << validation.message;
          EXPECT_GT(validation.checked, 0) << line;
        }
}

// Writes a wrong value into one element of the output on the last rank only, after the real
// collective ran: the real result everywhere else.
class DamagingCommunicator final : public Communicator {
 public:
  explicit DamagingCommunicator(std::unique_ptr<Communicator> real) : real_(std::move(real)) {}
  int rank() const override { return real_->rank(); }
  int size() const override { return real_->size(); }
  std::string implementation() const override { return real_->implementation(); }
  Status all_reduce(Buffer send, Buffer recv, std::size_t count, DType dtype) override {
    TB_RETURN_IF_ERROR(real_->all_reduce(send, recv, count, dtype));
    if (rank() == size() - 1) damage(recv, count, dtype);
    return Status::Ok();
  }
  Status reduce_scatter(Buffer send, Buffer recv, std::size_t count, DType dtype) override {
    return real_->reduce_scatter(send, recv, count, dtype);
  }
  Status all_gather(Buffer send, Buffer recv, std::size_t count, DType dtype) override {
    return real_->all_gather(send, recv, count, dtype);
  }
  Status broadcast(Buffer send, Buffer recv, std::size_t count, DType dtype, int root) override {
    return real_->broadcast(send, recv, count, dtype, root);
  }
  Status start_all_reduce(Buffer data, std::size_t count, DType dtype) override {
    return real_->start_all_reduce(data, count, dtype);
  }
  Status poll() override { return real_->poll(); }
  Status wait_all() override { return real_->wait_all(); }

 private:
  // One f32 element, the one in the middle, off by one: the smallest error an integer sum has.
  static void damage(Buffer recv, std::size_t count, DType dtype) {
    ASSERT_EQ(dtype, DType::f32);
    static_cast<float*>(recv.data)[count / 2] += 1.0f;
  }
  std::unique_ptr<Communicator> real_;
};

class DamagingBackend final : public testing_support::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status make_communicator(World& world, std::unique_ptr<Communicator>* out) override {
    std::unique_ptr<Communicator> real;
    TB_RETURN_IF_ERROR(real_.make_communicator(world, &real));
    *out = std::make_unique<DamagingCommunicator>(std::move(real));
    return Status::Ok();
  }
};

TEST(CollectiveWorkloads, OneDamagedElementOnOneRankFailsTheCaseOnEveryRank) {
  std::unique_ptr<Backend> real = cpu_backend();
  ASSERT_TRUE(real) << "no CPU backend";
  DamagingBackend damaging(*real);
  std::unique_ptr<Workload> workload = collective("allreduce bytes=4000 dtype=f32");
  ASSERT_TRUE(workload->setup(damaging, 7).ok());
  const Validation validation = workload->validate();
  EXPECT_FALSE(validation.passed);
  EXPECT_EQ(validation.error, 1) << "one element differs, on one rank";
  if (test::world().rank() == test::world().size() - 1)
    EXPECT_NE(validation.message.find("1 of 1000 elements differ on rank"), std::string::npos)
        << validation.message;
  else
    EXPECT_NE(validation.message.find("another rank"), std::string::npos) << validation.message;

  // The same case undamaged passes: the failure is the damage's.
  std::unique_ptr<Workload> clean = collective("allreduce bytes=4000 dtype=f32");
  ASSERT_TRUE(clean->setup(*real, 7).ok());
  EXPECT_TRUE(clean->validate().passed);
}

// Out of memory on the last rank only: every rank's setup fails, none waits in a collective.
class ShortOfMemoryOnTheLastRank final : public testing_support::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status allocate(std::size_t bytes, Buffer* out) override {
    if (test::world().rank() == test::world().size() - 1)
      return Status::OutOfMemory("planted: no memory on this rank");
    return real_.allocate(bytes, out);
  }
};

TEST(CollectiveWorkloads, ARankThatCannotAllocateFailsTheCaseOnEveryRank) {
  std::unique_ptr<Backend> real = cpu_backend();
  ASSERT_TRUE(real) << "no CPU backend";
  ShortOfMemoryOnTheLastRank short_of_memory(*real);
  std::unique_ptr<Workload> workload = collective("allgather bytes=4096 dtype=bf16");
  const Status status = workload->setup(short_of_memory, 5);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(test::world().rank() == test::world().size() - 1
                                      ? "planted"
                                      : "another rank failed"),
            std::string::npos)
      << status.message();
}

TEST(CollectiveWorkloads, SizesThatCannotBeSplitAreRefusedWithOneLine) {
  // Not whole elements: refused when the descriptor is read, on any number of ranks.
  try {
    create_workload(Descriptor::parse("allreduce bytes=6 dtype=f32"), DeviceInfo{});
    ADD_FAILURE() << "6 bytes of f32 accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not a whole number of f32 elements"), std::string::npos)
        << e.what();
  }
  if (test::world().size() < 2)
    GTEST_SKIP() << "splitting over ranks needs 2 or more (trainbench_add_mpi_test runs this at 2)";
  std::unique_ptr<Backend> backend = cpu_backend();
  ASSERT_TRUE(backend) << "no CPU backend";
  for (const char* kind : {"reduce_scatter", "allgather"}) {
    // One element more than a multiple of the ranks.
    const std::string line =
        fmt::format("{} bytes={} dtype=f32", kind, 4 * (2 * test::world().size() + 1));
    std::unique_ptr<Workload> workload = collective(line);
    const Status status = workload->setup(*backend, 1);
    EXPECT_EQ(status.code(), StatusCode::invalid_argument) << line;
    EXPECT_NE(status.message().find("cannot be split evenly"), std::string::npos)
        << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos);
  }
}

TEST(CollectiveWorkloads, SamplesAreTheSlowestRanksAndAgreeEverywhere) {
  std::unique_ptr<Backend> backend = cpu_backend();
  ASSERT_TRUE(backend) << "no CPU backend";
  std::unique_ptr<Workload> workload = collective("allreduce bytes=64K dtype=f32");
  ASSERT_TRUE(workload->setup(*backend, 3).ok());
  ASSERT_TRUE(workload->validate().passed);
  ASSERT_TRUE(workload->times_itself());
  ASSERT_TRUE(workload->run().ok());
  const std::vector<double> samples = workload->own_samples();
  ASSERT_GE(samples.size(), 5u);
  for (double seconds : samples) {
    EXPECT_TRUE(std::isfinite(seconds) && seconds > 0) << seconds;
    // Every rank holds the same (slowest) time for every sample.
    EXPECT_EQ(test::world().max(seconds), seconds);
    EXPECT_EQ(-test::world().max(-seconds), seconds);
  }
  const WorkCounts counts = workload->counts();
  EXPECT_EQ(counts.collective_bytes, 65536);
  EXPECT_DOUBLE_EQ(counts.bus_factor, bus_bandwidth_factor("allreduce", test::world().size()));
}

TEST(CollectiveWorkloads, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("allreduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("allreduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("allreduce", 1), 0.0);
}

TEST(CollectiveWorkloads, SizesSweepExpandsLikeNcclTests) {
  const std::vector<Descriptor> sweep =
      expand_shapes(Descriptor::parse("allreduce sizes=8:1G:x2 dtype=bf16"));
  ASSERT_EQ(sweep.size(), 28u);  // 8 B, 16 B, ..., 1 GiB
  EXPECT_EQ(sweep.front().to_string(), "allreduce bytes=8 dtype=bf16");
  EXPECT_EQ(sweep.back().get("bytes"), std::to_string(std::int64_t{1} << 30));
  EXPECT_EQ(expand_shapes(Descriptor::parse("broadcast sizes=1K:4K:+1K")).size(), 4u);
  EXPECT_THROW(expand_shapes(Descriptor::parse("allreduce sizes=8:4")), UsageError);
  EXPECT_THROW(expand_shapes(Descriptor::parse("allreduce sizes=8:1G:x1")), UsageError);
  EXPECT_THROW(create_workload(Descriptor::parse("allreduce sizes=8:64"), DeviceInfo{}),
               UsageError);
  // A size or a sweep step that would wrap is refused, and a sweep has at most 1000 cases.
  for (const char* wraps :
       {"allreduce bytes=999999999999G", "allreduce bytes=8589934592G", "allreduce bytes=-8",
        "allreduce sizes=8:999999999999G", "allreduce sizes=1G:4G:x99999999999999G",
        "allreduce sizes=8:8589934592G:x2"})
    EXPECT_THROW(for (const Descriptor& one
                      : expand_shapes(Descriptor::parse(wraps))) create_workload(one, DeviceInfo{}),
                 UsageError)
        << wraps;
  EXPECT_THROW(expand_shapes(Descriptor::parse("allreduce sizes=8:1G:+8")), UsageError);
  EXPECT_EQ(expand_shapes(Descriptor::parse("allreduce sizes=1:1000:+1")).size(), 1000u);
  // The last step stops at the largest size, not past it with a wrapped one.
  const auto top = expand_shapes(Descriptor::parse("allreduce sizes=2G:4611686018427387904:x2"));
  EXPECT_EQ(top.back().get("bytes"), std::to_string(std::int64_t{1} << 62));
  // Canonical: bytes as a plain count, whatever suffix it was written with.
  EXPECT_EQ(collective("allgather bytes=1M")->descriptor().to_string(),
            "allgather bytes=1048576 dtype=f32 inplace=0");
}

}  // namespace
}  // namespace tb
