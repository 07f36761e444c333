#include "models/reference_check.h"

#include <algorithm>
#include <cmath>

#include "backends/numeric.h"
#include "backends/registry.h"
#include "backends/seeded.h"
#include "models/training_step.h"

namespace tb {

std::vector<NamedTensor> seeded_batch(const Network& network, std::uint64_t seed) {
  std::vector<NamedTensor> batch;
  for (const NetworkInput& input : network.inputs()) {
    const TensorShape& shape = network.tensors()[input.tensor];
    const auto count = static_cast<std::size_t>(shape.elements());
    const std::uint64_t stream = mix64(seed + batch.size());
    std::vector<std::int64_t> dims = {shape.n, shape.c, shape.h, shape.w};
    while (dims.size() > 1 && dims.back() == 1) dims.pop_back();  // labels: [N]
    NamedTensor tensor{input.name, dims, {}, input.indices};
    if (input.indices) {
      for (std::size_t i = 0; i < count; ++i)
        tensor.values.push_back(static_cast<double>(
            input.minimum +
            static_cast<std::int64_t>(mix64(stream + i * kGoldenGamma) %
                                      static_cast<std::uint64_t>(input.bound - input.minimum))));
    } else {
      const std::vector<float> values = random_values(count, stream, DType::f32);
      tensor.values.assign(values.begin(), values.end());
    }
    batch.push_back(std::move(tensor));
  }
  return batch;
}

Status prepared_step(Backend& backend, const Network& network, const StepOptions& options,
                     const std::vector<NamedTensor>& batch, std::uint64_t weight_seed,
                     std::unique_ptr<TrainingStep>* out) {
  TB_RETURN_IF_ERROR(TrainingStep::create(backend, network, options, out));
  TB_RETURN_IF_ERROR((*out)->set_batch(batch));
  return (*out)->initialize_parameters(weight_seed);
}

Status compare_with_reference(Backend& backend, const Network& network, const StepOptions& options,
                              const std::vector<NamedTensor>& batch, std::uint64_t weight_seed,
                              ReferenceComparison* out) {
  // The reference runs on the host whatever device the step runs on (a GPU has no f64 ops);
  // declared first, it outlives the step whose buffers it holds.
  const std::unique_ptr<Backend> host = make_reference_backend();
  std::unique_ptr<TrainingStep> step, reference;
  TB_RETURN_IF_ERROR(prepared_step(backend, network, options, batch, weight_seed, &step));
  // The reference starts from the step's own (rounded) weights, not from the seed again.
  StepOptions reference_options = options;
  reference_options.dtype = DType::f64, reference_options.layout = Layout::plain;
  reference_options.winograd_allowed = false;
  TB_RETURN_IF_ERROR(TrainingStep::create(*host, network, reference_options, &reference));
  std::vector<NamedTensor> state;
  TB_RETURN_IF_ERROR(step->state(&state));
  TB_RETURN_IF_ERROR(reference->load_state(state));
  TB_RETURN_IF_ERROR(reference->set_batch(batch));
  for (TrainingStep* s : {step.get(), reference.get()})
    TB_RETURN_IF_ERROR(s->run(/*update=*/false, {}));
  TB_RETURN_IF_ERROR(step->loss(&out->loss));
  TB_RETURN_IF_ERROR(reference->loss(&out->reference_loss));
  std::vector<NamedTensor> grads, reference_grads;
  TB_RETURN_IF_ERROR(step->gradients(&grads));
  TB_RETURN_IF_ERROR(reference->gradients(&reference_grads));
  const GradientError worst = worst_gradient_error(grads, reference_grads);
  out->worst_gradient_error = worst.error;
  out->worst_parameter = worst.parameter;
  out->parameters_checked = static_cast<std::int64_t>(grads.size());
  return Status::Ok();
}

GradientError worst_gradient_error(const std::vector<NamedTensor>& grads,
                                   const std::vector<NamedTensor>& reference) {
  double sum = 0, count = 0;
  for (const NamedTensor& grad : reference) {
    for (double v : grad.values) sum += v * v;
    count += static_cast<double>(grad.values.size());
  }
  const double rms = std::sqrt(sum / std::max(count, 1.0));
  GradientError worst;
  for (std::size_t p = 0; p < grads.size(); ++p) {
    const std::vector<double>&got = grads[p].values, &want = reference.at(p).values;
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff += (got.at(i) - want[i]) * (got.at(i) - want[i]);
      norm += want[i] * want[i];
    }
    const double floor = kCancelledGradient * rms * std::sqrt(static_cast<double>(want.size()));
    double error = std::sqrt(diff) / std::max({std::sqrt(norm), floor, 1e-300});
    if (std::isnan(error)) error = INFINITY;
    if (!(error <= worst.error)) worst = {error, grads[p].name};
  }
  return worst;
}

}  // namespace tb
