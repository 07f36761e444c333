// Fashion-MNIST as Debian's dataset-fashion-mnist installs it: 60,000 training and 10,000 test
// images of 28x28 grey pixels in 10 classes, as gzip-compressed IDX files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/status.h"

namespace tb {

inline constexpr const char* kFashionMnistDirectory = "/usr/share/datasets/fashion-mnist";
// kFashionMnistDirectory, or the directory $TRAINBENCH_FASHION_MNIST_DIR names.
std::string fashion_mnist_directory();
inline constexpr std::int64_t kFashionMnistSide = 28, kFashionMnistClasses = 10;

struct LabelledImages {
  std::int64_t count = 0;
  std::vector<float> pixels;  // count x 1 x 28 x 28, normalized: (x / 255 - mean) / std
  std::vector<std::int32_t> labels;
};

struct FashionMnist {
  LabelledImages train, test;
};

// Reads and checks the four files (counts, image size, labels below 10); an error names the
// file and the Debian package that provides it.
Status load_fashion_mnist(const std::string& directory, FashionMnist* out);

}  // namespace tb
