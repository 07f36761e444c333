#include "models/network.h"

namespace tb {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv:
      return "conv";
    case LayerKind::batch_norm:
      return "batch_norm";
    case LayerKind::max_pool:
      return "max_pool";
    case LayerKind::global_avg_pool:
      return "global_avg_pool";
    case LayerKind::fully_connected:
      return "fully_connected";
    case LayerKind::add_relu:
      return "residual_join";
    case LayerKind::softmax_cross_entropy:
      return "loss";
    case LayerKind::linear:
      return "linear";
    case LayerKind::embedding:
      return "embedding";
    case LayerKind::gather_rows:
      return "gather_rows";
    case LayerKind::layer_norm:
      return "layer_norm";
    case LayerKind::rms_norm:
      return "rms_norm";
    case LayerKind::gelu:
      return "gelu";
    case LayerKind::tanh:
      return "tanh";
    case LayerKind::dropout:
      return "dropout";
    case LayerKind::add:
      return "residual_add";
    case LayerKind::attention_scores:
    case LayerKind::attention_softmax:
    case LayerKind::attention_context:
    case LayerKind::attention:
      return "attention";
  }
  return "unknown";
}

std::int64_t Parameter::elements() const {
  std::int64_t count = 1;
  for (std::int64_t dim : dims) count *= dim;
  return count;
}

int Network::add_tensor(TensorShape shape) {
  tensors_.push_back(shape);
  return static_cast<int>(tensors_.size()) - 1;
}

int Network::add_parameter(Parameter parameter) {
  parameters_.push_back(std::move(parameter));
  return static_cast<int>(parameters_.size()) - 1;
}

int Network::add_input(NetworkInput input, TensorShape shape) {
  input.tensor = add_tensor(shape);
  inputs_.push_back(std::move(input));
  return inputs_.back().tensor;
}

const NetworkInput* Network::find_input(int tensor) const {
  for (const NetworkInput& input : inputs_)
    if (input.tensor == tensor) return &input;
  return nullptr;
}

int Network::add_layer(Layer layer, TensorShape output_shape) {
  layer.output = add_tensor(output_shape);
  layers_.push_back(std::move(layer));
  return layers_.back().output;
}

std::int64_t Network::parameter_count() const {
  std::int64_t count = 0;
  for (const Parameter& parameter : parameters_) count += parameter.elements();
  return count;
}

double Network::forward_macs_per_sample() const {
  double macs = 0;
  for (const Layer& layer : layers_) {
    const TensorShape& in = tensors_[layer.inputs.at(0)];
    const TensorShape& out = tensors_[layer.output];
    if (layer.kind == LayerKind::conv)
      macs +=
          static_cast<double>(out.n) * (out.c * out.h * out.w) * in.c * layer.kernel * layer.kernel;
    if (layer.kind == LayerKind::fully_connected || layer.kind == LayerKind::linear)
      macs += static_cast<double>(in.n) * (in.c * in.h * in.w) * out.c;
    // scores: B * heads * S x S outputs over head_dim; context: B * S x hidden outputs over S
    if (layer.kind == LayerKind::attention_scores)
      macs += static_cast<double>(out.n) * out.c * (in.c / layer.heads);
    if (layer.kind == LayerKind::attention_context)
      macs += static_cast<double>(out.n) * out.c * layer.sequence;
    if (layer.kind == LayerKind::attention)  // both GEMMs, as the unfused layers count them
      macs += 2.0 * static_cast<double>(out.n) * out.c * layer.sequence;
  }
  return macs / static_cast<double>(batch);
}

double training_flops_per_sample(const Network& network) {
  return 2.0 * 3.0 * network.forward_macs_per_sample();
}

}  // namespace tb
