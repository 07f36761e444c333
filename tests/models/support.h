// Pieces the model tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/registry.h"
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

// Runs `op` once with `inputs` for its leading non-output operands (plain layout, as doubles;
// integers for i32 operands) and returns every operand afterwards, plain, as doubles.
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
    std::vector<char> bytes(spec.elements() * dtype_size(spec.dtype));
    for (std::size_t k = 0; k < spec.elements(); ++k) {
      if (spec.dtype == DType::f64) reinterpret_cast<double*>(bytes.data())[k] = inputs[i].at(k);
      if (spec.dtype == DType::f32)
        reinterpret_cast<float*>(bytes.data())[k] = static_cast<float>(inputs[i].at(k));
      if (spec.dtype == DType::i32)
        reinterpret_cast<std::int32_t*>(bytes.data())[k] =
            static_cast<std::int32_t>(inputs[i].at(k));
    }
    EXPECT_TRUE(backend.import_operand(*plan, static_cast<int>(i), bytes.data(), buffers[i]).ok());
  }
  const Status ran = backend.execute(*plan, buffers, workspace);
  EXPECT_TRUE(ran.ok()) << ran.message();
  std::vector<std::vector<double>> outputs;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const OperandSpec& spec = plan->operands()[i];
    std::vector<double> values(spec.elements());
    if (spec.dtype == DType::f64 || spec.dtype == DType::f32) {
      std::vector<char> bytes(spec.elements() * dtype_size(spec.dtype));
      EXPECT_TRUE(
          backend.export_operand(*plan, static_cast<int>(i), buffers[i], bytes.data()).ok());
      for (std::size_t k = 0; k < values.size(); ++k)
        values[k] = spec.dtype == DType::f64 ? reinterpret_cast<double*>(bytes.data())[k]
                                             : reinterpret_cast<float*>(bytes.data())[k];
    }
    outputs.push_back(std::move(values));
  }
  for (Buffer buffer : buffers) backend.release(buffer);
  if (workspace.data) backend.release(workspace);
  return outputs;
}

inline std::vector<double> random(std::size_t count, std::uint64_t seed) {
  const std::vector<float> values = random_values(count, seed, DType::f32);
  return {values.begin(), values.end()};
}

}  // namespace tb::testing_support
