// A plan that runs one oneDNN primitive (2.x or 3.x, made through onednn_api.h). Each operand has
// three memory descriptors: `plain` (what import / export exchange with callers), `planned` (what
// the caller's buffer holds) and `primitive` (what the primitive computes on). When the last two
// differ, the plan stages the operand in its workspace: inputs are reordered in before the
// primitive runs and outputs reordered out after it (the weights of a network, kept plain for
// the optimizer, while a convolution wants them blocked).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/onednn/onednn_layout.h"
#include "backends/operands.h"

namespace tb::onednn {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

memory::data_type to_dnnl(DType dtype);

// fp32 means fp32: strict math on every primitive, so ONEDNN_DEFAULT_FPMATH_MODE cannot turn
// fp32 primitives into bf16 ones. Scratchpads are ours, planned as the workspace.
dnnl::primitive_attr base_attr();

// The activation layout an op's tensors use for `layout` (plain: NCHW; native: the one chosen
// for the dtype, `shared`).
tag activation_tag(Layout layout, memory::dim channels, const ActivationLayout& shared);

class OneDnnPlan final : public cpu::CpuPlan {
 public:
  // For an operand the primitive does not take (running statistics the epilogue updates).
  static constexpr int kNoArgument = -1;
  struct Operand {
    OperandSpec spec;
    int arg;
    memory::desc plain, planned;
    memory::desc primitive = {};  // empty when it equals planned
  };
  // Work done after the primitive, on the caller's operand buffers (running statistics).
  using Epilogue = std::function<void(const BoundOperands&)>;

  OneDnnPlan(const dnnl::engine& engine, dnnl::stream& stream, dnnl::primitive primitive,
             const dnnl::primitive_desc_base& pd, std::vector<Operand> operands,
             Epilogue epilogue = {});

  // An f32 scalar the primitive reads at every execution as argument `arg` (a scale).
  void bind_scalar(int arg, float value);

  Status run(std::span<const Buffer> operands, Buffer workspace) override;
  Status import_operand(int index, const void* plain_host, Buffer device) const override;
  Status export_operand(int index, Buffer device, void* plain_host) const override;
  // Read in place through the planned layout's blocking; reordered whole where it has none.
  Status gather_operand(int index, Buffer device, std::span<const std::int64_t> positions,
                        void* values) const override;

 private:
  struct Staging {
    std::size_t operand, offset;
    memory caller, staged;
    dnnl::reorder reorder;
  };
  Status convert(const memory::desc& from_desc, void* from, const memory::desc& to_desc,
                 void* to) const;

  dnnl::engine engine_;
  dnnl::stream& stream_;
  dnnl::primitive primitive_;
  std::vector<Operand> descs_;
  std::vector<memory> memories_;  // per operand: the memory the primitive's argument uses
  std::vector<bool> is_staged_;
  std::vector<Staging> staged_inputs_, staged_outputs_;
  memory scratchpad_;
  std::unordered_map<int, memory> args_;
  Epilogue epilogue_;
};

// What one declared operand is to the primitive: its argument and descriptors, for the
// operand called `name` (backends/operands.cpp declares the names and their order).
struct OperandBinding {
  const char* name;
  int arg;
  memory::desc plain, planned, primitive = {};
};

// The plan's operand list, in the order the op's `specs` declare, each with the binding of its
// name. Throws std::logic_error for an operand left unbound or a binding of an undeclared name.
std::vector<OneDnnPlan::Operand> bind_operands(const std::vector<OperandSpec>& specs,
                                               const std::vector<OperandBinding>& bindings);

// Plans the training ops (batch norm, pooling, ReLU, add, fully connected) and convolutions
// whose layout is plain or native, with `shared` the native activation layout of the op's
// dtype: one plan() per op. An op whose kernel would be a reference one in that layout computes
// in nhwc, then nchw, where those have an optimized kernel, reordering its operands in and out.
// Throws dnnl::error as oneDNN does.
class LayerPlanner {
 public:
  LayerPlanner(const dnnl::engine& engine, dnnl::stream& stream, const ActivationLayout& shared,
               std::unique_ptr<Plan>* out)
      : engine_(engine), stream_(stream), shared_(shared), out_(out) {}
  Status plan(const ConvOp& op) const;
  Status plan(const BatchNormOp& op) const;
  Status plan(const PoolOp& op) const;
  Status plan(const EltwiseOp& op) const;
  Status plan(const LayerNormOp& op) const;
  Status plan(const BinaryOp& op) const;
  Status plan(const FullyConnectedOp& op) const;

 private:
  const dnnl::engine& engine_;
  dnnl::stream& stream_;
  const ActivationLayout& shared_;
  std::unique_ptr<Plan>* out_;
};

// The ops LayerPlanner plans (the rest are the shared CPU code's).
template <typename Op>
concept LayerOp = requires(const LayerPlanner& planner, const Op& op) {
  planner.plan(op);
};

}  // namespace tb::onednn
