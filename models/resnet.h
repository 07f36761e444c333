// ResNet-50 (and smaller ResNets from the same code) as torchvision builds it (v1.5: the stride of
// a down-sampling bottleneck is on its 3x3 convolution), with torchvision's parameter names and
// initialization. Image size, batch, width and class count are settable so tests can run a reduced
// network.
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

enum class ResNetBlock {
  bottleneck,  // 1x1, 3x3, 1x1 with 4x expansion (ResNet-50)
  basic,       // two 3x3 convolutions (ResNet-18 and the small ResNets)
};

struct ResNetConfig {
  std::int64_t batch = 32, image = 224;
  std::int64_t width = 64;  // channels of the stem; the stages use 1x, 2x, 4x, 8x this
  std::int64_t classes = 1000;
  std::vector<int> blocks = {3, 4, 6, 3};  // blocks per stage (ResNet-50)
  ResNetBlock block = ResNetBlock::bottleneck;
  std::int64_t in_channels = 3;
  // ImageNet's stem (7x7 stride 2 and a 3x3 max-pool), or a 3x3 stride-1 stem without
  // pooling for small images (28x28, 32x32).
  bool small_stem = false;
};

// ResNet-8 for Fashion-MNIST: the small stem (32 channels), one basic block per stage at 32,
// 64 and 128 channels, 10 classes: 308,074 parameters.
ResNetConfig resnet8_fashion_mnist(std::int64_t batch);

// Throws UsageError when the image is too small for the network's stride-2 reductions.
Network build_resnet(const ResNetConfig& config);

}  // namespace tb
