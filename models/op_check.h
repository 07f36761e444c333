// The op-by-op check behind TrainingStep::check_ops (private to models/): each op of one step,
// as TrainingStep::run_ops hands them over in run()'s order, run on the step and compared
// with the same op in f64 on the host fed the inputs the step's op read. It reads the step
// through a StepView and changes nothing but what the ops themselves write.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "models/training_step_impl.h"

namespace tb {

// How the checker compares an op: over sampled whole tensors (an update over a large model's
// parameters), as a cast (exactly), not at all (no f64 reference: run only), on sampled
// elements (a product too large for its f64 loops) or in full.
enum class CheckPath { by_tensors, cast, unchecked, sampled, in_full };
CheckPath check_path(const StepOp& op, const OpCheckOptions& options);

// The host memory an OpChecker holds at its most beyond the step's own, from the step's planned
// ops (nothing allocated, nothing run): the f64 copies of each operand, which it keeps from op to
// op grown to the largest (so per operand position, the largest op's), the f64 reference plan's
// operands, and the forward's masks and indices until the run ends. What a memory sweep must
// leave room for before a batch is validated; within the allocator's rounding of what the check
// grows the process by (a test holds it to 16 MiB).
class OpCheckFootprint {
 public:
  OpCheckFootprint(const StepView& step, const OpCheckOptions& options);
  ~OpCheckFootprint();
  Status add(const StepOp& op);  // in run_ops()'s order
  std::uint64_t bytes() const;

 private:
  void grow(std::vector<std::uint64_t>& largest, std::size_t position, std::uint64_t bytes);
  const StepView step_;
  const OpCheckOptions& options_;
  std::unique_ptr<Backend> host_;  // plans the f64 references (their workspaces)
  // The most held at each position, as the checker keeps its vectors: the inputs by operand,
  // the reference plan's operands (its workspace after them), the compared outputs in order.
  std::vector<std::uint64_t> inputs_, reference_operands_, outputs_;
  // The largest of the single vectors it keeps (the import scratch, a sampled output) and of
  // what one op holds only while it is checked (a cast's copies, an update's changes).
  std::uint64_t scratch_ = 0, sampled_values_ = 0, transient_ = 0;
  std::map<int, std::uint64_t> saved_state_;  // by root slot: masks and indices kept
};

class OpChecker {
 public:
  // Results go to `out` (which starts passed); `step` and `options` must outlive the checker.
  OpChecker(const StepView& step, const OpCheckOptions& options, OpCheck* out);
  ~OpChecker();
  OpChecker(const OpChecker&) = delete;
  OpChecker& operator=(const OpChecker&) = delete;

  Status check(const StepOp& op);  // runs `op` on the step and judges its outputs

 private:
  class Checker;
  std::unique_ptr<Checker> checker_;
};

}  // namespace tb
