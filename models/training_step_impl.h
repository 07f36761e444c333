// TrainingStep's inside, shared by the files that build, run and check it (private to
// models/: training_step.cpp runs the step and moves its state, lowering.cpp turns the
// network into ops, step_memory.* places the buffers, op_check.cpp checks every op).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "models/network.h"
#include "models/precision.h"
#include "models/step_memory.h"
#include "models/training_step.h"

namespace tb {

enum class Phase { weight_cast, forward, backward, optimizer };

// An op's operands as step slots, by the names the op declares (backends/operands.cpp).
using NamedSlots = std::vector<std::pair<std::string_view, int>>;

// One lowered op: its plan and the slots of its operands, in the plan's operand order.
struct StepOp {
  OpDesc desc;
  std::unique_ptr<Plan> plan;
  std::vector<int> slots;
  int layer;
  Phase phase;
  std::vector<Buffer> buffers = {};  // the slots' memory, resolved once after allocation
};

// An operand's values in double; `scratch` (optional) holds the raw bytes between calls.
Status export_values(Backend& backend, const Plan& plan, int index, Buffer buffer,
                     std::vector<double>* out, std::vector<char>* scratch = nullptr);

// What the op-by-op check reads of a step (op_check.cpp): the network, the buffers and where
// each parameter lies in the flat buffers; nothing in it changes the step's records. The
// backend is the step's own, through which its buffers are read and its ops run.
struct StepView {
  Backend& backend;
  const Network& network;
  const StepMemory& memory;
  const std::vector<std::int64_t>& parameter_offsets;  // elements into the flat buffers
  Buffer workspace;

  Status execute(const StepOp& op) const {
    return backend.execute(*op.plan, op.buffers, workspace);
  }
  // "layer4.0.conv2 conv backward" (the optimizer and weight casts name their phase).
  std::string op_label(const StepOp& op) const;
};

struct TrainingStep::Impl {
  using Op = StepOp;
  // Where a network input enters the step: the first forward op that reads it.
  struct InputBinding {
    int op = -1, operand = -1;
  };

  Backend& backend;
  const Network network;
  PrecisionPolicy policy;
  DType channel_dtype;  // batch-norm statistics, scale and shift; layer-norm ones; masks
  StepOptions options;
  StepMemory memory;
  std::vector<Op> weight_cast, forward, backward;  // weight_cast: the compute copy (mixed)
  Op optimizer;
  std::vector<std::int64_t> parameter_offsets;  // elements into the flat parameter buffer
  std::int64_t param_total = 0;                 // elements, padding included
  int params_slot = -1, grads_slot = -1;
  std::vector<int> optimizer_state_slots;       // momentum, or AdamW's / LAMB's two moments
  int tensor_offsets_slot = -1;                 // LAMB: where each parameter tensor starts
  int hyper_slot = -1, dropout_step_slot = -1;  // host memory
  // Loss scaling (models/precision.h): the scale and its inverse in host memory, the
  // unscale-and-check op after backward and the flag it writes.
  std::optional<DynamicLossScale> scaler;
  int loss_scale_slot = -1, inverse_scale_slot = -1, nonfinite_slot = -1;
  std::optional<Op> unscale;
  std::unique_ptr<GradientExchange> exchange;  // data parallel: the buckets' all-reduces
  std::vector<char> export_scratch;            // layer_output's raw bytes, kept between calls
  std::vector<int> loss_slots;
  int compute_params_slot = -1;  // the parameters in the compute dtype (mixed precision)
  std::vector<int> value, grad;  // per tensor
  std::vector<std::pair<int, int>> running;  // per layer: running mean / var slots (-1: none)
  std::vector<InputBinding> input_bindings;  // per network input
  Buffer workspace;
  std::size_t workspace_bytes = 0;

  Impl(Backend& b, const Network& n, const StepOptions& step_options);
  ~Impl();

  StepView view() const { return {backend, network, memory, parameter_offsets, workspace}; }

  // Lowering (lowering.cpp): the network's layers as planned ops on planned slots.
  Status build();
  // `operands`: the op's slots by operand name, put in the plan's order here.
  Status add_op(std::vector<Op>& list, const OpDesc& desc, const NamedSlots& operands, int layer,
                Phase phase);
  int param_slot(int base, int param, DType type);
  DType slot_dtype_of_base(int base) const {
    return base == compute_params_slot ? policy.compute : policy.master;
  }

  // Every planned op of a step, the optimizer and the unscale check included.
  template <typename Visit>
  void for_each_op(Visit&& visit) const {
    for (const std::vector<Op>* list : {&weight_cast, &forward, &backward})
      for (const Op& op : *list) visit(op);
    if (unscale) visit(*unscale);
    if (optimizer.plan) visit(optimizer);
  }

  // The framework's state dict, in its order: each parameter (a tied one once, where its first
  // user lists it), and after a batch norm's parameters its running statistics and counter.
  struct StateEntry {
    std::string name;
    std::vector<std::int64_t> dims;
    int parameter = -1;     // a parameter id, or
    int running_slot = -1;  // a running-statistics slot, or neither: num_batches_tracked
  };
  std::vector<StateEntry> state_entries() const;
  Status download_slot(int slot, std::vector<char>* out) const {
    out->resize(memory[slot].bytes);
    return backend.download(memory[slot].buffer, out->data(), out->size());
  }
  // Parameter `p` out of a flat buffer (values or gradients) in the master dtype.
  NamedTensor parameter_tensor(const std::vector<char>& flat, int p) const;

  Status allocate();
  Status execute(Op& op) { return backend.execute(*op.plan, op.buffers, workspace); }
  Status write_loss_scale();
  // The forward op that writes layer `name`'s output, and which of its operands that is.
  Status find_output(const std::string& name, const Op** op, int* operand) const;
  // Dropout masks are a function of the step number: forward and backward agree, and the f64
  // reference of the same step draws the same mask.
  Status set_dropout_step(std::int64_t step);
};

}  // namespace tb
