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

Status prepared_step(Backend& backend, const Network& network, const StepOptions& options,
                     std::uint64_t batch_seed, std::uint64_t weight_seed,
                     std::unique_ptr<TrainingStep>* out) {
  TB_RETURN_IF_ERROR(TrainingStep::create(backend, network, options, out));
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  seeded_batch(network, batch_seed, &images, &labels);
  TB_RETURN_IF_ERROR((*out)->set_batch(images, labels));
  return (*out)->initialize_parameters(weight_seed);
}

Status compare_with_reference(Backend& backend, const Network& network, const StepOptions& options,
                              std::uint64_t seed, ReferenceComparison* out) {
  std::unique_ptr<TrainingStep> step, reference;
  TB_RETURN_IF_ERROR(prepared_step(backend, network, options, seed, seed, &step));
  // The reference starts from the step's own (rounded) weights, not from the seed again.
  TB_RETURN_IF_ERROR(
      TrainingStep::create(backend, network, {DType::f64, Layout::plain}, &reference));
  std::vector<NamedTensor> state;
  TB_RETURN_IF_ERROR(step->state(&state));
  TB_RETURN_IF_ERROR(reference->load_state(state));
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  seeded_batch(network, seed, &images, &labels);
  TB_RETURN_IF_ERROR(reference->set_batch(images, labels));
  for (TrainingStep* s : {step.get(), reference.get()})
    TB_RETURN_IF_ERROR(s->run(/*update=*/false, {}));
  TB_RETURN_IF_ERROR(step->loss(&out->loss));
  TB_RETURN_IF_ERROR(reference->loss(&out->reference_loss));
  std::vector<NamedTensor> grads, reference_grads;
  TB_RETURN_IF_ERROR(step->gradients(&grads));
  TB_RETURN_IF_ERROR(reference->gradients(&reference_grads));
  out->worst_gradient_error = 0;
  out->parameters_checked = static_cast<std::int64_t>(grads.size());
  for (std::size_t p = 0; p < grads.size(); ++p) {
    const double error = relative_l2_error(grads[p].values, reference_grads[p].values);
    if (!(error <= out->worst_gradient_error)) {
      out->worst_gradient_error = error;
      out->worst_parameter = grads[p].name;
    }
  }
  return Status::Ok();
}

}  // namespace tb
