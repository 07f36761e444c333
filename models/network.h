// A network for training: tensors, layers and named parameters, described once and run on any
// backend by TrainingStep. The description holds no memory; it is what a model builder
// (ResNet-50, ...) produces and what the executor plans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tb {

struct TensorShape {  // logical NCHW; a [N, C] tensor has h = w = 1
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t elements() const { return n * c * h * w; }
};

enum class LayerKind {
  conv,             // no bias; params: weight
  batch_norm,       // params: weight, bias; buffers: running_mean, running_var
  max_pool,         //
  global_avg_pool,  // output [N, C]
  fully_connected,  // params: weight [out, in], bias [out]
  add_relu,         // relu(input0 + input1): the residual join
  softmax_cross_entropy,
};

// "conv", "batch_norm", "max_pool", ...: how reports name a layer's kind.
const char* layer_kind_name(LayerKind kind);

enum class ParamInit { kaiming_normal_fan_out, ones, zeros, linear_uniform };

struct Parameter {
  std::string name;  // as the framework names it: "layer1.0.conv1.weight"
  std::vector<std::int64_t> dims;
  ParamInit init = ParamInit::zeros;
  std::int64_t fan_in = 1, fan_out = 1;
  std::int64_t elements() const;
};

struct Layer {
  std::string name;  // "conv1", "layer1.0.bn1", "layer1.0" (the residual join), "fc"
  LayerKind kind = LayerKind::conv;
  std::vector<int> inputs = {};  // tensor ids
  int output = -1;
  std::vector<int> params = {};  // parameter ids, in the framework's order
  // conv and max-pool geometry; out_channels for conv and fully connected
  std::int64_t kernel = 1, stride = 1, pad = 0, out_channels = 0;
  bool relu = false;  // batch norm followed by ReLU
};

class Network {
 public:
  int add_tensor(TensorShape shape);
  int add_parameter(Parameter parameter);
  // Appends a layer and creates its output tensor; returns the output tensor id.
  int add_layer(Layer layer, TensorShape output_shape);

  const std::vector<TensorShape>& tensors() const { return tensors_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  std::int64_t parameter_count() const;  // trainable values
  // Tensor ids of the data the step is fed: the input batch and, for the loss, the labels.
  int input = -1;
  int classes = 0;
  // Forward multiply-accumulates for one sample, counted from the layers (convolutions and
  // fully connected layers; the rest is below 1%).
  double forward_macs_per_sample() const;

 private:
  std::vector<TensorShape> tensors_;
  std::vector<Layer> layers_;
  std::vector<Parameter> parameters_;
};

}  // namespace tb
