// Pieces the model tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/registry.h"
#include "models/host_values.h"
#include "models/reference_check.h"
#include "models/training_step.h"
#include "workloads/workload.h"

namespace tb::testing_support {

// The backend, or null when it is not in this build or not usable here.
inline std::unique_ptr<Backend> make_backend(const char* name) {
  const BackendEntry* entry = find_backend(name);
  if (!entry || !entry->probe().usable) return nullptr;
  std::unique_ptr<Backend> backend;
  EXPECT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  return backend;
}

// A CPU backend (cpu-onednn, else cpu-openblas), or null when neither is in this build.
inline std::unique_ptr<Backend> make_cpu_backend() {
  auto backend = make_backend("cpu-onednn");
  return backend ? std::move(backend) : make_backend("cpu-openblas");
}

// Runs `op` once with `inputs` for its leading non-output operands (plain layout, as doubles
// rounded to the operand's dtype; integers for i32 operands) and returns every operand
// afterwards, plain, as doubles.
inline std::vector<std::vector<double>> run_op(Backend& backend, const OpDesc& op,
                                               const std::vector<std::vector<double>>& inputs) {
  std::unique_ptr<Plan> plan;
  const Status planned = backend.plan(op, &plan);
  EXPECT_TRUE(planned.ok()) << planned.message();
  if (!planned.ok()) return {};
  std::vector<Buffer> buffers(plan->operands().size());
  for (std::size_t i = 0; i < buffers.size(); ++i)
    EXPECT_TRUE(backend.allocate(plan->operands()[i].bytes, &buffers[i]).ok());
  Buffer workspace;
  if (plan->workspace_bytes()) {
    EXPECT_TRUE(backend.allocate(plan->workspace_bytes(), &workspace).ok());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const OperandSpec& spec = plan->operands()[i];
    EXPECT_GE(inputs[i].size(), spec.elements()) << spec.name;
    std::vector<double> values = inputs[i];
    values.resize(spec.elements());
    const std::vector<char> bytes = to_bytes(values, spec.dtype);
    EXPECT_TRUE(backend.import_operand(*plan, static_cast<int>(i), bytes.data(), buffers[i]).ok());
  }
  const Status ran = backend.execute(*plan, buffers, workspace);
  EXPECT_TRUE(ran.ok()) << ran.message();
  std::vector<std::vector<double>> outputs;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const OperandSpec& spec = plan->operands()[i];
    std::vector<char> bytes(spec.elements() * dtype_size(spec.dtype));
    EXPECT_TRUE(backend.export_operand(*plan, static_cast<int>(i), buffers[i], bytes.data()).ok());
    outputs.push_back(from_bytes(bytes.data(), spec.elements(), spec.dtype));
  }
  for (Buffer buffer : buffers) backend.release(buffer);
  if (workspace.data) backend.release(workspace);
  return outputs;
}

inline std::vector<double> random(std::size_t count, std::uint64_t seed) {
  const std::vector<float> values = random_values(count, seed, DType::f32);
  return {values.begin(), values.end()};
}

// Every op of a step of `net` on `backend` (its update too, unless it evaluates) against the
// same op in f64 fed the step's own inputs, in fp32 and in bf16 (mixed precision) where the backend
// has it; at least `min_outputs` outputs compared per dtype.
inline void expect_ops_match_reference(Backend& backend, const Network& net,
                                       const StepOptions& base,
                                       const std::vector<NamedTensor>& batch, int min_outputs) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    StepOptions options = base;
    options.dtype = dtype;
    std::unique_ptr<TrainingStep> step;
    const Status made = prepared_step(backend, net, options, batch, 17, &step);
    if (made.code() == StatusCode::unimplemented) continue;  // bf16 on cpu-openblas
    ASSERT_TRUE(made.ok()) << made.message();
    OpCheck check;
    const Status checked = step->check_ops(
        &check, base.evaluation ? OpCheckOptions{} : OpCheckOptions{.update = OptimizerSettings{}});
    ASSERT_TRUE(checked.ok()) << checked.message();
    EXPECT_TRUE(check.passed) << check.worst_output << ": " << check.worst_error;
    EXPECT_GT(check.outputs_compared, min_outputs);
    std::printf("%s: %lld ops, worst %.3g (allowed %g) at %s\n",
                std::string(dtype_name(dtype)).c_str(), static_cast<long long>(check.ops_checked),
                check.worst_error, check.worst_tolerance, check.worst_output.c_str());
  }
}

// A double-precision step's gradients next to central differences of its own loss.
class FiniteDifferences {
 public:
  FiniteDifferences(Backend& backend, const Network& net, const std::vector<NamedTensor>& batch,
                    std::uint64_t weight_seed) {
    const Status made =
        prepared_step(backend, net, {DType::f64, Layout::plain}, batch, weight_seed, &step_);
    EXPECT_TRUE(made.ok()) << made.message();
    if (!made.ok()) return;
    EXPECT_TRUE(step_->state(&state_).ok());
    EXPECT_TRUE(step_->run(false, {}).ok());
    EXPECT_TRUE(step_->gradients(&gradients_).ok());
  }
  const std::vector<NamedTensor>& gradients() const { return gradients_; }
  // (loss(w + h) - loss(w - h)) / 2h for entry `index` of parameter `name`.
  double derivative(const std::string& name, std::size_t index, double h) {
    return (loss_with(name, index, h) - loss_with(name, index, -h)) / (2 * h);
  }

 private:
  double loss_with(const std::string& name, std::size_t index, double delta) {
    std::vector<NamedTensor> moved = state_;
    for (NamedTensor& t : moved)
      if (t.name == name) t.values[index] += delta;
    EXPECT_TRUE(step_->load_state(moved).ok());
    EXPECT_TRUE(step_->run(false, {}).ok());
    double loss = 0;
    EXPECT_TRUE(step_->loss(&loss).ok());
    return loss;
  }

  std::unique_ptr<TrainingStep> step_;
  std::vector<NamedTensor> state_, gradients_;
};

}  // namespace tb::testing_support
