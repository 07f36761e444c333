// allreduce, reduce_scatter, allgather, broadcast: one collective between the ranks of the run
// on the backend's memory (MPI on host memory for the CPU backends, NCCL on device memory for
// cuda), with nccl-tests' sizes, bandwidths and exact validation (doc/PERFORMANCE.md there).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "models/host_values.h"
#include "workloads/collective.h"
#include "workloads/kind_registry.h"

namespace tb {
namespace {

// Each collective's key table, with the factory below.
const WorkloadKind& collective_kind(std::string_view name);

enum class Collective { allreduce, reduce_scatter, allgather, broadcast };
constexpr const char* kCollectiveNames[] = {"allreduce", "reduce_scatter", "allgather",
                                            "broadcast"};
constexpr int kRoot = 0;  // broadcast's source rank

// Timing, as nccl-tests does it (-w 5, and enough iterations per sample to be measurable):
// the counts are agreed across ranks, so every rank runs the same number of collectives.
constexpr int kWarmupRuns = 5;
constexpr int kMinSamples = 5, kMaxSamples = 1000;
constexpr double kTimeBudgetSeconds = 0.5;            // per case, after warm-up
constexpr double kMinSampleSeconds = 1e-3;            // a sample repeats the collective this long
constexpr std::size_t kChunk = std::size_t{1} << 20;  // elements filled or checked at a time

Collective collective_named(std::string_view name) {
  const auto found = std::find(std::begin(kCollectiveNames), std::end(kCollectiveNames), name);
  if (found == std::end(kCollectiveNames))
    throw std::logic_error(fmt::format("'{}' is not a collective", name));
  return static_cast<Collective>(found - std::begin(kCollectiveNames));
}

// A size as nccl-tests' -b / -e read it: a count of bytes, K, M and G powers of 1024 (Ki, Mi,
// Gi accepted too), so `sizes=8:1G:x2` ends at 1 GiB as `-b 8 -e 1G -f 2` does.
std::int64_t parse_size(const std::string& text, const std::string& descriptor) {
  std::string digits = text;
  std::int64_t unit = 1;
  if (digits.ends_with('i')) digits.pop_back();
  if (!digits.empty() && std::string_view("KMG").find(digits.back()) != std::string_view::npos) {
    unit = std::int64_t{1} << (10 * (1 + std::string_view("KMG").find(digits.back())));
    digits.pop_back();
  }
  const auto count = parse_whole_number(digits, 1);
  const auto bytes = count ? checked_product({*count, unit}) : std::nullopt;
  if (!bytes)
    throw UsageError(
        fmt::format("'{}' in '{}' is not a size in bytes from 1 to 2^62 (8, 64K, 1G: K, M, G are "
                    "powers of 1024, as nccl-tests reads them)",
                    text, descriptor));
  return *bytes;
}

struct CollectiveCase {
  Collective collective = Collective::allreduce;
  std::int64_t bytes = 0;  // the size nccl-tests prints (reduce_scatter / allgather: the whole)
  DType dtype = DType::f32;
  bool in_place = false;
};

// The seeded inputs: integers in [-bound, bound], so that every sum of up to 256 / bound of them
// is exact even in bf16 (8 significant bits: |sum| <= 256), and every element of every output
// has one known value.
class CollectiveData {
 public:
  CollectiveData(std::uint64_t seed, int ranks)
      : seed_(seed), ranks_(ranks), bound_(std::clamp(256 / std::max(ranks, 1), 1, 8)) {}
  // Element `i` of the data rank `rank` contributes (its whole send buffer, or for allgather
  // the chunk it owns at its own offset of the gathered whole).
  double value(int rank, std::size_t i) const {
    const std::uint64_t z = mix64(seed_ + kGoldenGamma * static_cast<std::uint64_t>(rank + 1) +
                                  static_cast<std::uint64_t>(i) * 0x2545f4914f6cdd1dull);
    return static_cast<double>(static_cast<std::int64_t>(z % (2 * bound_ + 1)) - bound_);
  }
  double sum(std::size_t i) const {
    double total = 0;
    for (int rank = 0; rank < ranks_; ++rank) total += value(rank, i);
    return total;
  }

 private:
  std::uint64_t seed_;
  int ranks_;
  int bound_;
};

// Each buffer is allocated at least 2 MiB (x86-64's and most Arm kernels' transparent huge page),
// so a small collective reads and writes huge-page-backed memory, as an application's long-lived
// communication buffers are (nccl-tests' and the baseline's one buffer for the whole sweep, DDP's
// 25 MB buckets): on ordinary 4 KiB pages, Open MPI's shared-memory copies of 128 KiB to 1 MiB
// ran at 0.6-0.8x the same calls on huge pages here.
std::uint64_t allocation(std::uint64_t bytes) {
  return std::max<std::uint64_t>(bytes, 2u << 20);
}

class CollectiveWorkload final : public Workload {
 public:
  explicit CollectiveWorkload(CollectiveCase c) : case_(c) {}
  ~CollectiveWorkload() override {
    if (!backend_) return;
    if (larger_.data) backend_->release(larger_);
    if (smaller_.data) backend_->release(smaller_);
    if (barrier_.data) backend_->release(barrier_);
  }

  Descriptor descriptor() const override {
    return canonical_descriptor(
        collective_kind(kCollectiveNames[static_cast<int>(case_.collective)]),
        {{"bytes", std::to_string(case_.bytes)},
         {"dtype", std::string(dtype_name(case_.dtype))},
         {"inplace", case_.in_place ? "1" : "0"}});
  }
  DType dtype() const override { return case_.dtype; }
  Headline headline() const override {
    return {"busbw_gbps", "GB/s",
            fmt::format("{} bus bandwidth", kCollectiveNames[static_cast<int>(case_.collective)])};
  }
  WorkCounts counts() const override {
    WorkCounts counts;
    counts.collective_bytes = static_cast<double>(case_.bytes);
    counts.bus_factor = bus_bandwidth_factor(kCollectiveNames[static_cast<int>(case_.collective)],
                                             world_ ? world_->size() : 1);
    return counts;
  }
  // The larger buffer, and the smaller one unless in place (its ranks' share of the larger one
  // for reduce_scatter and allgather).
  std::uint64_t device_bytes() const override {
    const auto whole = static_cast<std::uint64_t>(case_.bytes);
    if (case_.in_place) return allocation(whole);
    const bool split =
        case_.collective == Collective::reduce_scatter || case_.collective == Collective::allgather;
    return allocation(whole) +
           allocation(split ? whole / static_cast<std::uint64_t>(ranks()) : whole);
  }

  void join(World& world) override { world_ = &world; }
  Status setup(Backend& backend, std::uint64_t seed) override;
  Status run() override;  // warm-up and every sample (times_itself)
  Validation validate() override;
  bool times_itself() const override { return true; }
  std::vector<double> own_samples() const override { return samples_; }

  std::string implementation() const override {
    if (!communicator_) return "";
    return ranks() == 1 ? communicator_->implementation() +
                              "; world size 1: a trivial collective, nothing crosses a process"
                        : communicator_->implementation();
  }
  std::string math_mode() const override { return "strict"; }
  std::vector<ReferenceKernelUse> reference_kernels() const override { return {}; }
  bool emulates_bf16() const override { return false; }
  nlohmann::json details() const override {
    nlohmann::json details = {{"world_size", ranks()},
                              {"count", element_count()},
                              {"repetitions_per_sample", repetitions_}};
    if (ranks() == 1)
      details["note"] = "world size 1 (no launcher or one rank): a trivial collective";
    return details;
  }

 private:
  int ranks() const { return world_ ? world_->size() : 1; }
  int rank() const { return world_ ? world_->rank() : 0; }
  std::size_t element_size() const { return dtype_size(case_.dtype); }
  std::size_t element_count() const {  // of the larger buffer
    return static_cast<std::size_t>(case_.bytes) / element_size();
  }
  bool split() const {
    return case_.collective == Collective::reduce_scatter ||
           case_.collective == Collective::allgather;
  }
  std::size_t chunk_count() const {  // the rank's share of reduce_scatter's and allgather's
    return element_count() / static_cast<std::size_t>(ranks());
  }
  Status collective();
  Status allocate_buffers();
  Status fill_inputs();
  // `mine`, or a failure when another rank's status is one: every rank takes the same path.
  Status agreed(Status mine);
  // Expected element `i` of this rank's output.
  double expected(std::size_t i) const;
  std::size_t output_count() const {
    return case_.collective == Collective::reduce_scatter ? chunk_count() : element_count();
  }
  Status check_output(Validation* result);
  Status time_samples();

  CollectiveCase case_;
  World* world_ = nullptr;
  Backend* backend_ = nullptr;
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<Timer> timer_;
  Buffer larger_, smaller_;  // owned; smaller_ stays empty in place
  Buffer barrier_;           // one f32, all-reduced to start every sample together
  Buffer send_, recv_;       // views of them
  std::uint64_t seed_ = 0;
  int repetitions_ = 1;
  std::vector<double> samples_;
};

Status CollectiveWorkload::setup(Backend& backend, std::uint64_t seed) {
  if (!world_) return Status::Failed("collective: the runner gave no world (join)");
  if (split() && element_count() % static_cast<std::size_t>(ranks()) != 0)
    return Status::InvalidArgument(fmt::format(
        "{} of {} elements cannot be split evenly over {} ranks",
        kCollectiveNames[static_cast<int>(case_.collective)], element_count(), ranks()));
  backend_ = &backend;
  seed_ = seed;
  // Buffers before the communicator, and the outcome agreed: a rank that cannot allocate
  // (memory differs between hosts) fails the case everywhere instead of leaving the others
  // waiting in a collective it never joins.
  TB_RETURN_IF_ERROR(agreed(allocate_buffers()));
  TB_RETURN_IF_ERROR(backend.make_communicator(*world_, &communicator_));
  timer_ = communicator_->make_timer();
  if (!timer_) timer_ = backend.make_timer();
  return agreed(fill_inputs());
}

// The larger buffer is reduce_scatter's send and allgather's receive buffer; in place, the
// smaller one is the rank's own chunk of it (the whole buffer for allreduce and broadcast).
Status CollectiveWorkload::allocate_buffers() {
  const auto whole = static_cast<std::size_t>(case_.bytes);
  const std::size_t part = split() ? whole / static_cast<std::size_t>(ranks()) : whole;
  TB_RETURN_IF_ERROR(backend_->allocate(sizeof(float), &barrier_));
  TB_RETURN_IF_ERROR(backend_->allocate(allocation(whole), &larger_));
  const Buffer larger = slice(larger_, 0, whole);
  Buffer smaller = slice(larger_, split() ? static_cast<std::size_t>(rank()) * part : 0, part);
  if (!case_.in_place) {
    TB_RETURN_IF_ERROR(backend_->allocate(allocation(part), &smaller_));
    smaller = slice(smaller_, 0, part);
  }
  const bool gather = case_.collective == Collective::allgather;
  send_ = gather ? smaller : larger;
  recv_ = gather ? larger : smaller;
  return Status::Ok();
}

Status CollectiveWorkload::agreed(Status mine) {
  const bool elsewhere = world_->max(mine.ok() ? 0 : 1) > 0;
  if (!mine.ok() || !elsewhere) return mine;
  return Status::Failed("another rank failed to set up or fill its buffers");
}

Status CollectiveWorkload::collective() {
  switch (case_.collective) {
    case Collective::allreduce:
      return communicator_->all_reduce(send_, recv_, element_count(), case_.dtype);
    case Collective::reduce_scatter:
      return communicator_->reduce_scatter(send_, recv_, chunk_count(), case_.dtype);
    case Collective::allgather:
      return communicator_->all_gather(send_, recv_, chunk_count(), case_.dtype);
    case Collective::broadcast:
      return communicator_->broadcast(send_, recv_, element_count(), case_.dtype, kRoot);
  }
  return Status::Failed("unknown collective");
}

// The send buffer's elements, chunk by chunk (a 1 GiB case holds no host copy of its data).
Status CollectiveWorkload::fill_inputs() {
  const CollectiveData data(seed_, ranks());
  const bool gather = case_.collective == Collective::allgather;
  const std::size_t count = gather ? chunk_count() : element_count();
  const std::size_t first = gather ? static_cast<std::size_t>(rank()) * count : 0;
  std::vector<double> values;
  for (std::size_t begin = 0; begin < count; begin += kChunk) {
    values.resize(std::min(kChunk, count - begin));
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = data.value(rank(), first + begin + i);
    const std::vector<char> bytes = to_bytes(values, case_.dtype);
    TB_RETURN_IF_ERROR(backend_->upload(
        bytes.data(), slice(send_, begin * element_size(), bytes.size()), bytes.size()));
  }
  return Status::Ok();
}

double CollectiveWorkload::expected(std::size_t i) const {
  const CollectiveData data(seed_, ranks());
  switch (case_.collective) {
    case Collective::allreduce:
      return data.sum(i);
    case Collective::reduce_scatter:
      return data.sum(static_cast<std::size_t>(rank()) * chunk_count() + i);
    case Collective::allgather:
      return data.value(static_cast<int>(i / chunk_count()), i);
    case Collective::broadcast:
      return data.value(kRoot, i);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Status CollectiveWorkload::check_output(Validation* result) {
  const std::size_t count = output_count();
  std::int64_t mismatches = 0;
  std::size_t first = 0;
  double first_got = 0;
  std::vector<double> got;
  for (std::size_t begin = 0; begin < count; begin += kChunk) {
    const std::size_t n = std::min(kChunk, count - begin);
    std::vector<char> bytes(n * element_size());
    TB_RETURN_IF_ERROR(backend_->download(slice(recv_, begin * element_size(), bytes.size()),
                                          bytes.data(), bytes.size()));
    from_bytes(bytes.data(), n, case_.dtype, &got);
    std::int64_t chunk_mismatches = 0;
#pragma omp parallel for schedule(static) reduction(+ : chunk_mismatches)
    for (std::size_t i = 0; i < n; ++i) chunk_mismatches += !(got[i] == expected(begin + i));
    for (std::size_t i = 0; i < n && mismatches == 0 && chunk_mismatches > 0; ++i)
      if (!(got[i] == expected(begin + i))) {
        first = begin + i;
        first_got = got[i];
        break;
      }
    mismatches += chunk_mismatches;
  }
  // A wrong element on any rank fails the case on every rank.
  const double worst = world_->max(static_cast<double>(mismatches));
  result->checked = static_cast<std::int64_t>(count);
  result->error = worst;
  result->passed = worst == 0;
  if (mismatches > 0)
    result->message = fmt::format("{} of {} elements differ on rank {}, first at {}: {} for {}",
                                  mismatches, count, rank(), first, first_got, expected(first));
  else if (!result->passed)
    result->message =
        fmt::format("{} elements differ on another rank (this rank's {} are exact)", worst, count);
  return Status::Ok();
}

Validation CollectiveWorkload::validate() {
  Validation result;
  result.method =
      "every output element equals its exact value (seeded integers whose sums are exact in the "
      "dtype), on every rank, the verdict agreed across ranks";
  Status status = fill_inputs();
  if (status.ok() && !case_.in_place) {
    // An element the collective never writes reads NaN, never a stale right answer.
    const std::vector<char> nan =
        to_bytes(std::vector<double>(std::min(kChunk, output_count()), NAN), case_.dtype);
    for (std::size_t begin = 0; status.ok() && begin < output_count(); begin += kChunk) {
      const std::size_t bytes = std::min(kChunk, output_count() - begin) * element_size();
      status = backend_->upload(nan.data(), slice(recv_, begin * element_size(), bytes), bytes);
    }
  }
  status = agreed(status);
  if (status.ok()) status = collective();
  if (status.ok()) status = communicator_->synchronize();
  if (status.ok()) status = check_output(&result);
  if (!status.ok()) result.message = status.message();
  return result;
}

// Per sample: a barrier (on the communicator), the collective `repetitions_` times, and the
// slowest rank's time per collective. Every decision that sets how many collectives run
// (repetitions, when to stop) is taken from values agreed across ranks, so no rank waits in a
// collective the others skip.
Status CollectiveWorkload::time_samples() {
  using Clock = std::chrono::steady_clock;
  auto timed = [this](int repetitions, double* seconds) {
    // The barrier is a one-element all-reduce on the communicator: the ranks leave it within
    // microseconds (World::barrier sleeps while it waits, up to 1 ms, which would land in the
    // sample as one rank's late start), and on a GPU it orders the start on the stream.
    TB_RETURN_IF_ERROR(communicator_->all_reduce(barrier_, barrier_, 1, DType::f32));
    timer_->start();
    for (int r = 0; r < repetitions; ++r) TB_RETURN_IF_ERROR(collective());
    timer_->stop();
    *seconds = world_->max(timer_->elapsed_seconds() / repetitions);
    return Status::Ok();
  };
  samples_.clear();
  // The fastest of three probes of two calls sizes a sample: one descheduled rank in a probe
  // would otherwise make every sample a single call.
  double one = INFINITY;
  for (int probe = 0; probe < 3; ++probe) {
    double seconds = 0;
    TB_RETURN_IF_ERROR(timed(2, &seconds));
    one = std::min(one, seconds);
  }
  if (std::isfinite(one) && one > 0)
    repetitions_ = static_cast<int>(std::clamp(std::ceil(kMinSampleSeconds / one), 1.0, 1e5));
  const auto start = Clock::now();
  while (true) {
    const double spent = world_->max(std::chrono::duration<double>(Clock::now() - start).count());
    const int taken = static_cast<int>(samples_.size());
    if (taken >= kMaxSamples || (taken >= kMinSamples && spent >= kTimeBudgetSeconds)) break;
    double seconds = 0;
    TB_RETURN_IF_ERROR(timed(repetitions_, &seconds));
    samples_.push_back(seconds);
  }
  return Status::Ok();
}

Status CollectiveWorkload::run() {
  for (int r = 0; r < kWarmupRuns; ++r) TB_RETURN_IF_ERROR(collective());
  TB_RETURN_IF_ERROR(communicator_->synchronize());
  return time_samples();
}

std::vector<KeySpec> collective_keys(std::string_view name) {
  const bool split = name == "reduce_scatter" || name == "allgather";
  return {{.name = "bytes",
           .fallback = "33554432",
           .help = split ? "bytes of the whole, the size nccl-tests prints (K, M, G: 1024-based)"
                         : "bytes per rank, the size nccl-tests prints (K, M, G: 1024-based)"},
          choice_key("dtype", "f32", {"f32", "bf16", "f16"}, "element type (summed in it)"),
          choice_key("inplace", "0", {"0", "1"},
                     split ? "1: the rank's chunk of the larger buffer is the smaller one"
                           : "1: the output overwrites the input"),
          {.name = "sizes",
           .help = "MIN:MAX:xFACTOR (or :+STEP): one case per size, as nccl-tests' -b -e -f (-i); "
                   "at most 1000 cases"}};
}

}  // namespace

double bus_bandwidth_factor(std::string_view collective, int ranks) {
  const double n = ranks;
  switch (collective_named(collective)) {
    case Collective::allreduce:
      return 2 * (n - 1) / n;  // each rank sends and receives 2(n-1)/n of the buffer
    case Collective::reduce_scatter:
    case Collective::allgather:
      return (n - 1) / n;  // of the whole, each rank receives the other ranks' n-1 chunks
    case Collective::broadcast:
      return 1;
  }
  return 0;
}

namespace {

const WorkloadKind& collective_kind(std::string_view name) {
  static const std::vector<WorkloadKind> kinds = [] {
    const char* summaries[] = {
        "sum all-reduce between the ranks of the run; busbw = algbw x 2(n-1)/n",
        "sum reduce-scatter: each rank gets its 1/n of the sum; busbw = algbw x (n-1)/n",
        "all-gather of every rank's 1/n into the whole; busbw = algbw x (n-1)/n",
        "broadcast from rank 0; busbw = algbw"};
    std::vector<WorkloadKind> all;
    for (int i = 0; i < 4; ++i)
      all.push_back({kCollectiveNames[i], summaries[i], collective_keys(kCollectiveNames[i])});
    return all;
  }();
  for (const WorkloadKind& kind : kinds)
    if (kind.name == name) return kind;
  throw std::logic_error(fmt::format("'{}' is not a collective", name));
}

std::unique_ptr<Workload> make_collective(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, collective_kind(descriptor.kind()));
  CollectiveCase c;
  c.collective = collective_named(descriptor.kind());
  c.bytes = parse_size(reader.text("bytes"), descriptor.to_string());
  c.dtype = parse_dtype(reader.choice("dtype"));
  c.in_place = reader.choice("inplace") == "1";
  reader.reject_unknown_keys();
  if (c.bytes % static_cast<std::int64_t>(dtype_size(c.dtype)) != 0)
    throw UsageError(
        fmt::format("'{}': {} bytes is not a whole number of {} elements ({} bytes each)",
                    descriptor.to_string(), c.bytes, dtype_name(c.dtype), dtype_size(c.dtype)));
  return std::make_unique<CollectiveWorkload>(c);
}

}  // namespace

std::vector<Descriptor> expand_collective_sizes(const Descriptor& descriptor) {
  const auto sweep = descriptor.get("sizes");
  if (!sweep) return {descriptor};
  const std::string line = descriptor.to_string();
  if (descriptor.has("bytes"))
    throw UsageError(fmt::format("'{}': give bytes= or sizes=, not both", line));
  const auto colon = sweep->find(':'), last = sweep->rfind(':');
  if (colon == std::string::npos)
    throw UsageError(
        fmt::format("sizes='{}' in '{}': expected MIN:MAX[:xFACTOR|:+STEP]", *sweep, line));
  const std::string step = last != colon ? sweep->substr(last + 1) : "x2";
  const std::int64_t min = parse_size(sweep->substr(0, colon), line);
  const std::int64_t max = parse_size(
      sweep->substr(colon + 1, last != colon ? last - colon - 1 : std::string::npos), line);
  const bool multiply = step.starts_with('x');
  if (step.size() < 2 || !(multiply || step.starts_with('+')))
    throw UsageError(fmt::format("sizes='{}' in '{}': the step is xFACTOR or +STEP, not '{}'",
                                 *sweep, line, step));
  const std::int64_t by = parse_size(step.substr(1), line);
  if (min > max || (multiply && by < 2))
    throw UsageError(fmt::format("sizes='{}' in '{}': needs MIN <= MAX and a factor of 2 or more",
                                 *sweep, line));
  std::vector<Descriptor> expanded;
  for (std::int64_t bytes = min;;) {
    if (expanded.size() == kMostSweepCases)
      throw UsageError(fmt::format("sizes='{}' in '{}' makes more than {} cases", *sweep, line,
                                   kMostSweepCases));
    Descriptor one(descriptor.kind());  // bytes= where sizes= was
    for (const auto& [key, value] : descriptor.params())
      one.set(key == "sizes" ? "bytes" : key, key == "sizes" ? std::to_string(bytes) : value);
    expanded.push_back(std::move(one));
    // The next size, unless it would pass max (tested before it is computed: no wrap).
    if (multiply ? bytes > max / by : bytes > max - by) break;
    bytes = multiply ? bytes * by : bytes + by;
  }
  return expanded;
}

KindEntry collective_kind_entry() {
  KindEntry entry{.kinds = {},
                  .make = [](const Descriptor& descriptor,
                             const DeviceInfo&) { return make_collective(descriptor); },
                  .expand = &expand_collective_sizes};
  for (const char* name : kCollectiveNames) entry.kinds.push_back(collective_kind(name));
  return entry;
}

}  // namespace tb
