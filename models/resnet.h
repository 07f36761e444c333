// ResNet-50 as torchvision builds it (v1.5: the stride of a down-sampling bottleneck is on its
// 3x3 convolution), with torchvision's parameter names and initialization. Image size, batch,
// width and class count are settable so tests can run a reduced network.
//
// Work: 4.089 G multiply-accumulates forward per 224x224 image at width 64 (convolutions and
// the classifier, counted by Network::forward_macs_per_sample). A training step counts as three
// forward passes (backward-data and backward-weights each cost about one forward), the
// convention of MLPerf and PyTorch's profilers: 2 x 3 x 4.089 G = 24.5 GFLOP per image.
#pragma once

#include <cstdint>
#include <vector>

#include "models/network.h"

namespace tb {

struct ResNetConfig {
  std::int64_t batch = 32, image = 224;
  std::int64_t width = 64;  // channels of the stem; the stages use 1x, 2x, 4x, 8x this
  std::int64_t classes = 1000;
  std::vector<int> blocks = {3, 4, 6, 3};  // bottlenecks per stage (ResNet-50)
};

// Throws UsageError when the image is too small for five stride-2 reductions.
Network build_resnet(const ResNetConfig& config);

}  // namespace tb
