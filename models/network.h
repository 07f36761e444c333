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

// Sequence models use [rows, features] tensors (n = rows, c = features): a batch of B sequences
// of S tokens is B * S rows.
enum class LayerKind {
  conv,                   // no bias; params: weight
  batch_norm,             // params: weight, bias; buffers: running_mean, running_var
  max_pool,               //
  global_avg_pool,        // output [N, C]
  fully_connected,        // the classifier: params weight [out, in], bias [out]; the head's dtype
  add_relu,               // relu(input0 + input1): the residual join
  softmax_cross_entropy,  // inputs: logits, labels (an index input); mean over rows
  linear,                 // as fully_connected, inside the model: the compute dtype
  embedding,              // inputs: ids (an index input); params: table [vocab, dim]
  gather_rows,            // inputs: source [rows, dim], row ids (an index input): rows of source
  layer_norm,             // over each row; params: weight, bias
  rms_norm,               // over each row (Llama's RMSNorm); params: weight
  gelu,                   // exact (erf)
  tanh,                   //
  dropout,                // `probability`; the mask is regenerated from a seed, not stored
  add,                    // input0 + input1: the transformer's residual
  // Attention over `heads` heads of sequences of `sequence` tokens. Queries, keys, values and
  // context are [B * S, heads * head_dim] as the projections write them.
  attention_scores,   // inputs: queries, keys -> [B * heads * S, S], unscaled
  attention_softmax,  // inputs: scores, additive mask [B, S] (a values input); scaled by
                      // 1 / sqrt(head_dim)
  attention_context,  // inputs: probabilities, values -> [B * S, heads * head_dim]
  // The three above as one fused op (AttentionOp: the probabilities are never stored, no
  // dropout on them): inputs queries, keys, values, key lengths [B] (an index input: keys from
  // there on are masked) -> context [B * S, heads * head_dim]; `scale` as attention_softmax.
  attention,
};

// "conv", "batch_norm", "max_pool", ...: how reports name a layer's kind.
const char* layer_kind_name(LayerKind kind);

// normal_0_02: BERT's normal(0, 0.02) for dense and embedding weights.
enum class ParamInit { kaiming_normal_fan_out, ones, zeros, linear_uniform, normal_0_02 };

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
  bool relu = false;                     // batch norm followed by ReLU
  float probability = 0;                 // dropout
  float scale = 1;                       // attention(_softmax): 1 / sqrt(head_dim)
  std::int64_t heads = 1, sequence = 1;  // attention
};

// Data a step is fed with each batch: `values` (f32: images, attention masks) or `indices`
// (i32 in [minimum, bound): token ids, positions, labels, sequence lengths). Inputs have no
// gradient.
struct NetworkInput {
  std::string name;  // "images", "labels", "input_ids", ...
  int tensor = -1;
  bool indices = false;
  std::int64_t bound = 0;
  std::int64_t minimum = 0;  // 1 for sequence lengths: a sequence has at least one token
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
  // Creates the input's tensor; returns its id.
  int add_input(NetworkInput input, TensorShape shape);
  const std::vector<NetworkInput>& inputs() const { return inputs_; }
  const NetworkInput* find_input(int tensor) const;  // nullptr for a computed tensor

  // Samples (images, sequences) per step.
  std::int64_t batch = 1;
  // Forward multiply-accumulates for one sample, counted from the layers (convolutions, fully
  // connected and linear layers, attention's two products; the rest is below 1%).
  double forward_macs_per_sample() const;

 private:
  std::vector<TensorShape> tensors_;
  std::vector<Layer> layers_;
  std::vector<Parameter> parameters_;
  std::vector<NetworkInput> inputs_;
};

// FLOPs of a training step per sample: three forward passes (backward-data and
// backward-weights each cost about one forward), 2 FLOPs per multiply-add, the convention of
// MLPerf and PyTorch's profilers.
double training_flops_per_sample(const Network& network);

}  // namespace tb
