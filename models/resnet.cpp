#include "models/resnet.h"

#include <fmt/format.h>

#include "backends/status.h"

namespace tb {
namespace {

std::int64_t conv_out(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

class Builder {
 public:
  explicit Builder(Network& network) : net_(network) {}

  int conv(const std::string& name, int input, std::int64_t out_channels, std::int64_t kernel,
           std::int64_t stride, std::int64_t pad) {
    const TensorShape in = net_.tensors()[input];
    Layer layer{name, LayerKind::conv, {input}};
    layer.kernel = kernel;
    layer.stride = stride;
    layer.pad = pad;
    layer.out_channels = out_channels;
    // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu")
    layer.params = {net_.add_parameter({name + ".weight",
                                        {out_channels, in.c, kernel, kernel},
                                        ParamInit::kaiming_normal_fan_out,
                                        in.c * kernel * kernel,
                                        out_channels * kernel * kernel})};
    const std::int64_t out = conv_out(in.h, kernel, stride, pad);
    return net_.add_layer(std::move(layer), {in.n, out_channels, out, out});
  }

  int batch_norm(const std::string& name, int input, bool relu) {
    const TensorShape in = net_.tensors()[input];
    Layer layer{name, LayerKind::batch_norm, {input}};
    layer.relu = relu;
    layer.params = {net_.add_parameter({name + ".weight", {in.c}, ParamInit::ones}),
                    net_.add_parameter({name + ".bias", {in.c}, ParamInit::zeros})};
    return net_.add_layer(std::move(layer), in);
  }

  int block(ResNetBlock kind, const std::string& name, int input, std::int64_t planes,
            std::int64_t stride) {
    const TensorShape in = net_.tensors()[input];
    std::int64_t out_channels = planes;
    int x = input;
    if (kind == ResNetBlock::bottleneck) {
      out_channels = planes * 4;
      x = batch_norm(name + ".bn1", conv(name + ".conv1", input, planes, 1, 1, 0), true);
      x = batch_norm(name + ".bn2", conv(name + ".conv2", x, planes, 3, stride, 1), true);
      x = batch_norm(name + ".bn3", conv(name + ".conv3", x, out_channels, 1, 1, 0), false);
    } else {
      x = batch_norm(name + ".bn1", conv(name + ".conv1", input, planes, 3, stride, 1), true);
      x = batch_norm(name + ".bn2", conv(name + ".conv2", x, planes, 3, 1, 1), false);
    }
    int shortcut = input;
    if (stride != 1 || in.c != out_channels)
      shortcut = batch_norm(name + ".downsample.1",
                            conv(name + ".downsample.0", input, out_channels, 1, stride, 0), false);
    const TensorShape out = net_.tensors()[x];
    return net_.add_layer({name, LayerKind::add_relu, {x, shortcut}}, out);
  }

 private:
  Network& net_;
};

// The stages, global average pool, classifier and loss after the stem's output `x`.
void finish_resnet(Network& net, Builder& build, const ResNetConfig& config, int x, int labels) {
  for (std::size_t stage = 0; stage < config.blocks.size(); ++stage) {
    const std::int64_t planes = config.width << stage;
    for (int block = 0; block < config.blocks[stage]; ++block)
      x = build.block(config.block, fmt::format("layer{}.{}", stage + 1, block), x, planes,
                      block == 0 && stage > 0 ? 2 : 1);
  }
  const TensorShape features = net.tensors()[x];
  x = net.add_layer({"avgpool", LayerKind::global_avg_pool, {x}}, {features.n, features.c, 1, 1});
  Layer fc{"fc", LayerKind::fully_connected, {x}};
  fc.out_channels = config.classes;
  // torchvision's nn.Linear: uniform in +-1/sqrt(in) for weight and bias.
  fc.params = {
      net.add_parameter({"fc.weight",
                         {config.classes, features.c},
                         ParamInit::linear_uniform,
                         features.c,
                         config.classes}),
      net.add_parameter(
          {"fc.bias", {config.classes}, ParamInit::linear_uniform, features.c, config.classes})};
  x = net.add_layer(std::move(fc), {features.n, config.classes, 1, 1});
  net.add_layer({"loss", LayerKind::softmax_cross_entropy, {x, labels}}, {1, 1, 1, 1});
}

}  // namespace

ResNetConfig resnet8_fashion_mnist(std::int64_t batch) {
  ResNetConfig config;
  config.batch = batch, config.image = 28, config.width = 32, config.classes = 10;
  config.blocks = {1, 1, 1}, config.block = ResNetBlock::basic;
  config.in_channels = 1, config.small_stem = true;
  return config;
}

Network build_resnet(const ResNetConfig& config) {
  if (config.batch < 1 || config.width < 1 || config.classes < 2 || config.in_channels < 1 ||
      config.blocks.empty())
    throw UsageError("ResNet needs batch, width, input channels >= 1, classes >= 2 and a stage");
  // Every stride-2 reduction (ImageNet's stem: its convolution and max-pool; each stage after
  // the first) must leave at least 1x1.
  const int reductions = static_cast<int>(config.blocks.size()) - 1 + (config.small_stem ? 0 : 2);
  if (config.image < (std::int64_t{1} << reductions))
    throw UsageError(fmt::format("ResNet image size {} is below the minimum of {}", config.image,
                                 std::int64_t{1} << reductions));
  Network net;
  Builder build(net);
  net.batch = config.batch;
  const int images =
      net.add_input({"images"}, {config.batch, config.in_channels, config.image, config.image});
  const int labels =
      net.add_input({"labels", -1, /*indices=*/true, config.classes}, {config.batch, 1, 1, 1});
  if (config.small_stem) {
    finish_resnet(net, build, config,
                  build.batch_norm("bn1", build.conv("conv1", images, config.width, 3, 1, 1), true),
                  labels);
    return net;
  }
  int x = build.batch_norm("bn1", build.conv("conv1", images, config.width, 7, 2, 3), true);
  {
    const TensorShape in = net.tensors()[x];
    Layer pool{"maxpool", LayerKind::max_pool, {x}};
    pool.kernel = 3;
    pool.stride = 2;
    pool.pad = 1;
    const std::int64_t out = conv_out(in.h, 3, 2, 1);
    x = net.add_layer(std::move(pool), {in.n, in.c, out, out});
  }
  finish_resnet(net, build, config, x, labels);
  return net;
}

}  // namespace tb
