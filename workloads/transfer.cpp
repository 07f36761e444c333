// transfer: host-to-device, device-to-host and device-to-device copies, from pinned or
// pageable host memory.
#include <algorithm>

#include <fmt/format.h>

#include "workloads/kind_registry.h"

namespace tb {
namespace {

const WorkloadKind& transfer_kind();  // the key table, with the factory below

constexpr const char* kDirections[] = {"h2d", "d2h", "d2d"};
constexpr std::int64_t kChunk = std::int64_t{16} << 20;

class TransferWorkload final : public OpWorkload {
 public:
  explicit TransferWorkload(TransferOp op) : op_(op) {}

  Descriptor descriptor() const override {
    std::map<std::string, std::string> values = {
        {"dir", kDirections[static_cast<int>(op_.direction)]},
        {"bytes", std::to_string(op_.bytes)}};
    if (op_.direction != TransferDirection::device_to_device)
      values["memory"] = op_.pinned ? "pinned" : "pageable";
    return canonical_descriptor(transfer_kind(), values);
  }
  DType dtype() const override { return DType::f32; }  // bytes are moved, not computed on
  Headline headline() const override { return {"gbps", "GB/s", ""}; }

  WorkCounts counts() const override {
    WorkCounts counts;
    // A device copy reads and writes every byte; a host <-> device copy crosses the link once.
    counts.bytes = static_cast<double>(op_.bytes) *
                   (op_.direction == TransferDirection::device_to_device ? 2 : 1);
    return counts;
  }
  std::uint64_t device_bytes() const override { return 2 * static_cast<std::uint64_t>(op_.bytes); }

  Status setup(Backend& backend, std::uint64_t seed) override {
    TB_RETURN_IF_ERROR(plan_and_allocate(backend, op_));
    seed_ = seed;
    std::vector<std::uint64_t> chunk;
    for (std::int64_t begin = 0; begin < op_.bytes; begin += kChunk) {
      const std::int64_t count = std::min(kChunk, op_.bytes - begin);
      pattern(begin, count, &chunk);
      TB_RETURN_IF_ERROR(backend.upload(chunk.data(), slice("source", begin, count),
                                        static_cast<std::size_t>(count)));
    }
    return Status::Ok();
  }

  Validation validate() override {
    Validation result;
    result.method = "every byte of the destination equals the seeded source";
    Status status = poison("destination");
    if (status.ok()) status = run();
    std::vector<std::uint64_t> expected, got;
    std::int64_t first = -1;
    for (std::int64_t begin = 0; status.ok() && begin < op_.bytes && first < 0; begin += kChunk) {
      const std::int64_t count = std::min(kChunk, op_.bytes - begin);
      pattern(begin, count, &expected);
      got.assign(expected.size(), 0);
      status = backend_->download(slice("destination", begin, count), got.data(),
                                  static_cast<std::size_t>(count));
      const auto* a = reinterpret_cast<const unsigned char*>(expected.data());
      const auto* b = reinterpret_cast<const unsigned char*>(got.data());
      const auto mismatch = std::mismatch(a, a + count, b);
      if (mismatch.first != a + count) first = begin + (mismatch.first - a);
    }
    if (!status.ok()) {
      result.message = status.message();
      return result;
    }
    result.checked = op_.bytes;
    result.passed = first < 0;
    if (!result.passed)
      result.message = fmt::format("destination differs from the source at byte {}", first);
    return result;
  }

 private:
  // Seeded bytes (splitmix64 of the position), so source and check need no stored copy.
  void pattern(std::int64_t begin, std::int64_t count, std::vector<std::uint64_t>* out) const {
    out->resize(static_cast<std::size_t>((count + 7) / 8));
    for (std::size_t i = 0; i < out->size(); ++i) {
      const auto word = static_cast<std::uint64_t>(begin / 8 + static_cast<std::int64_t>(i));
      (*out)[i] = mix64(seed_ + word * kGoldenGamma);
    }
  }
  Buffer slice(std::string_view operand, std::int64_t begin, std::int64_t count) const {
    Buffer buffer = this->buffer(operand);
    buffer.data = static_cast<char*>(buffer.data) + begin;
    buffer.bytes = static_cast<std::size_t>(count);
    return buffer;
  }

  TransferOp op_;
  std::uint64_t seed_ = 0;
};

const WorkloadKind& transfer_kind() {
  static const WorkloadKind kind{
      "transfer",
      "host <-> device and device <-> device copies (GPU backends)",
      {choice_key("dir", "h2d",
                  std::vector<std::string>(std::begin(kDirections), std::end(kDirections)),
                  "host to device, device to host, or device to device"),
       integer_key("bytes", "256Mi", "bytes copied, a multiple of 8"),
       choice_key("memory", "pinned", {"pinned", "pageable"},
                  "the host buffer (not for dir=d2d)")}};
  return kind;
}

std::unique_ptr<Workload> make_transfer(const Descriptor& descriptor) {
  DescriptorReader reader(descriptor, transfer_kind());
  TransferOp op;
  const std::string direction = reader.choice("dir");
  op.direction = direction == "h2d"   ? TransferDirection::host_to_device
                 : direction == "d2h" ? TransferDirection::device_to_host
                                      : TransferDirection::device_to_device;
  op.bytes = reader.integer("bytes");
  reader.checked_product({op.bytes, 2}, "a host and a device buffer of bytes");
  if (op.bytes % 8 != 0)
    throw UsageError(fmt::format("'{}': bytes must be a multiple of 8", descriptor.to_string()));
  if (op.direction != TransferDirection::device_to_device)
    op.pinned = reader.choice("memory") == "pinned";
  reader.reject_unknown_keys();
  return std::make_unique<TransferWorkload>(op);
}

}  // namespace

KindEntry transfer_kind_entry() {
  return {{transfer_kind()}, [](const Descriptor& descriptor, const DeviceInfo&) {
            return make_transfer(descriptor);
          }};
}

}  // namespace tb
