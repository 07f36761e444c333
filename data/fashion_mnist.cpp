#include "data/fashion_mnist.h"

#include <fmt/format.h>

#include "data/data_directory.h"
#include "data/idx_file.h"

namespace tb {
namespace {

// The training set's pixel mean and standard deviation (of x / 255), the usual normalization.
constexpr float kMean = 0.2860f, kStd = 0.3530f;

Status load_split(const std::string& directory, const std::string& prefix,
                  std::int64_t expected_count, LabelledImages* out) {
  IdxArray images, labels;
  TB_RETURN_IF_ERROR(read_idx_file(directory + "/" + prefix + "-images-idx3-ubyte.gz", 3, &images));
  TB_RETURN_IF_ERROR(read_idx_file(directory + "/" + prefix + "-labels-idx1-ubyte.gz", 1, &labels));
  if (images.dims !=
      std::vector<std::int64_t>{expected_count, kFashionMnistSide, kFashionMnistSide})
    return Status::InvalidArgument(fmt::format("{}: {} images of {}x{} expected, found [{}]",
                                               prefix, expected_count, kFashionMnistSide,
                                               kFashionMnistSide, fmt::join(images.dims, ", ")));
  if (labels.dims != std::vector<std::int64_t>{expected_count})
    return Status::InvalidArgument(
        fmt::format("{}: {} labels expected, found {}", prefix, expected_count, labels.dims[0]));
  out->count = expected_count;
  out->pixels.resize(images.values.size());
  for (std::size_t i = 0; i < images.values.size(); ++i)
    out->pixels[i] = (static_cast<float>(images.values[i]) / 255.0f - kMean) / kStd;
  out->labels.clear();
  for (std::uint8_t label : labels.values) {
    if (label >= kFashionMnistClasses)
      return Status::InvalidArgument(fmt::format("{}: label {} is not a class", prefix, label));
    out->labels.push_back(label);
  }
  return Status::Ok();
}

}  // namespace

Status load_fashion_mnist(const std::string& directory, FashionMnist* out) {
  Status status = load_split(directory, "train", 60000, &out->train);
  if (status.ok()) status = load_split(directory, "t10k", 10000, &out->test);
  if (!status.ok())
    return Status(status.code(),
                  fmt::format("Fashion-MNIST: {} (Debian package dataset-fashion-mnist installs "
                              "it in {})",
                              status.message(), kFashionMnistDirectory));
  return Status::Ok();
}

std::string fashion_mnist_directory() {
  return data_directory("TRAINBENCH_FASHION_MNIST_DIR", kFashionMnistDirectory);
}

}  // namespace tb
