// The op-by-op check behind TrainingStep::check_ops (private to models/): each op of one step,
// as TrainingStep::run_ops hands them over in run()'s order, run on the step and compared
// with the same op in f64 on the host fed the inputs the step's op read. It reads the step
// through a StepView and changes nothing but what the ops themselves write.
#pragma once

#include <memory>

#include "models/training_step_impl.h"

namespace tb {

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
