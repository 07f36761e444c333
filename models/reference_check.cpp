#include "models/reference_check.h"

#include <algorithm>
#include <cmath>

#include "models/training_step.h"
#include "workloads/workload.h"

namespace tb {

void seeded_batch(const Network& network, std::uint64_t seed, std::vector<float>* images,
                  std::vector<std::int32_t>* labels) {
  const TensorShape& in = network.tensors()[network.input];
  *images = random_values(static_cast<std::size_t>(in.elements()), seed, DType::f32);
  labels->clear();
  for (std::int64_t i = 0; i < in.n; ++i)
    labels->push_back(static_cast<std::int32_t>(mix64(seed + static_cast<std::uint64_t>(i)) %
                                                static_cast<std::uint64_t>(network.classes)));
}

Status compare_with_reference(Backend& backend, const Network& network, const StepOptions& options,
                              std::uint64_t seed, ReferenceComparison* out) {
  std::unique_ptr<TrainingStep> step, reference;
  TB_RETURN_IF_ERROR(TrainingStep::create(backend, network, options, &step));
  TB_RETURN_IF_ERROR(
      TrainingStep::create(backend, network, {DType::f64, Layout::plain}, &reference));
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  seeded_batch(network, seed, &images, &labels);
  TB_RETURN_IF_ERROR(step->initialize_parameters(seed));
  std::vector<NamedTensor> state;
  TB_RETURN_IF_ERROR(step->state(&state));
  TB_RETURN_IF_ERROR(reference->load_state(state));
  for (TrainingStep* s : {step.get(), reference.get()}) {
    TB_RETURN_IF_ERROR(s->set_batch(images, labels));
    TB_RETURN_IF_ERROR(s->run(/*update=*/false, {}));
  }
  TB_RETURN_IF_ERROR(step->loss(&out->loss));
  TB_RETURN_IF_ERROR(reference->loss(&out->reference_loss));
  std::vector<NamedTensor> grads, reference_grads;
  TB_RETURN_IF_ERROR(step->gradients(&grads));
  TB_RETURN_IF_ERROR(reference->gradients(&reference_grads));
  out->worst_gradient_error = 0;
  out->parameters_checked = static_cast<std::int64_t>(grads.size());
  for (std::size_t p = 0; p < grads.size(); ++p) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < grads[p].values.size(); ++i) {
      const double want = reference_grads[p].values[i];
      diff += (grads[p].values[i] - want) * (grads[p].values[i] - want);
      norm += want * want;
    }
    // NaN compares false: a NaN gradient must still count as the worst.
    const double error = std::sqrt(diff / std::max(norm, 1e-300));
    if (!(error <= out->worst_gradient_error)) {
      out->worst_gradient_error = std::isnan(error) ? INFINITY : error;
      out->worst_parameter = grads[p].name;
    }
  }
  return Status::Ok();
}

}  // namespace tb
