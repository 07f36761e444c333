#include "models/gradient_buckets.h"

#include <algorithm>

namespace tb {

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<ParameterGradient>& params,
                                                  std::size_t element_bytes,
                                                  std::size_t bucket_bytes) {
  std::vector<ParameterGradient> reversed = params;
  std::sort(
      reversed.begin(), reversed.end(),
      [](const ParameterGradient& a, const ParameterGradient& b) { return a.offset > b.offset; });
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  for (const ParameterGradient& param : reversed) {
    open.offset = param.offset;  // the bucket grows towards the start of the buffer
    open.count += param.count;
    open.ready_after = std::max(open.ready_after, param.ready_after);
    ++open.parameters;
    if (static_cast<std::size_t>(open.count) * element_bytes >= bucket_bytes) {
      buckets.push_back(open);
      open = {};
    }
  }
  if (open.parameters > 0) buckets.push_back(open);
  // Ties (buckets completed by the same op) keep backward order: the higher offset first.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const GradientBucket& a, const GradientBucket& b) {
                     return a.ready_after < b.ready_after;
                   });
  return buckets;
}

GradientExchange::GradientExchange(Communicator& communicator, Buffer gradients, DType dtype,
                                   std::vector<GradientBucket> buckets,
                                   const BucketOptions& options)
    : communicator_(communicator),
      gradients_(gradients),
      dtype_(dtype),
      buckets_(std::move(buckets)),
      options_(options) {}

Status GradientExchange::start(const GradientBucket& bucket) {
  const std::size_t size = dtype_size(dtype_);
  const Buffer range{static_cast<char*>(gradients_.data) + bucket.offset * size,
                     static_cast<std::size_t>(bucket.count) * size, gradients_.kind};
  in_flight_ = true;
  return communicator_.start_all_reduce(range, static_cast<std::size_t>(bucket.count), dtype_);
}

Status GradientExchange::after_backward_op(int op) {
  if (!options_.overlap) return Status::Ok();
  while (next_ < buckets_.size() && buckets_[next_].ready_after <= op)
    TB_RETURN_IF_ERROR(start(buckets_[next_++]));
  // MPI progresses a non-blocking collective only inside its calls on the CPU.
  return in_flight_ ? communicator_.poll() : Status::Ok();
}

Status GradientExchange::finish() {
  while (next_ < buckets_.size()) TB_RETURN_IF_ERROR(start(buckets_[next_++]));
  next_ = 0;
  in_flight_ = false;
  return communicator_.wait_all();
}

Status GradientExchange::reduce_all() {
  next_ = 0;
  return finish();
}

}  // namespace tb
