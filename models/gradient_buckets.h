// Data-parallel gradient averaging as PyTorch's DistributedDataParallel does it: the parameter
// gradients grouped into buckets of about `bucket_bytes`, each bucket all-reduced as soon as
// backward has written its last gradient, while the rest of backward still runs, and every
// bucket waited for before the first op that reads a gradient (the loss-scale unscale or the
// optimizer). A TrainingStep keeps its gradients in one flat buffer in the framework's order
// and a network's backward writes them roughly in reverse of it, so a bucket taken in reverse
// buffer order is one contiguous range: one all-reduce per bucket, in place, no copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/communicator.h"

namespace tb {

// One parameter's gradient in the flat gradient buffer.
struct ParameterGradient {
  std::int64_t offset = 0, count = 0;  // elements; count includes the padding up to the next
  int ready_after = -1;  // the backward op (in run order) that writes it last; -1: none does
};

struct GradientBucket {
  std::int64_t offset = 0, count = 0;  // a contiguous range of the flat buffer, in elements
  int ready_after = -1;                // the backward op after which all its gradients are final
  int parameters = 0;
};

// DDP's assignment (bucket_cap_mb): parameters in reverse buffer order fill a bucket until it
// holds `bucket_bytes` or more (so one larger parameter is a bucket of its own), the buckets
// covering the whole buffer. Returned in the order they are started: by ready_after, then by
// their place in backward order, the same on every rank (MPI matches collectives by order).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<ParameterGradient>& params,
                                                  std::size_t element_bytes,
                                                  std::size_t bucket_bytes);

struct BucketOptions {
  std::size_t bucket_bytes = std::size_t{25} << 20;  // DDP's default bucket_cap_mb=25
  // On: each bucket starts after the op that completes it and progresses (poll) between later
  // backward ops. Off: every bucket starts after backward and is waited for at once, so the
  // communication is not hidden at all (the baseline overlap is measured against).
  bool overlap = true;
};

// Runs the buckets' all-reduces for one step on `communicator` over `gradients` (the flat
// buffer, in `dtype`); the gradients are sums across the ranks (the step divides the loss
// gradient by the world size, so the sum is the mean over the global batch).
class GradientExchange {
 public:
  GradientExchange(Communicator& communicator, Buffer gradients, DType dtype,
                   std::vector<GradientBucket> buckets, const BucketOptions& options);

  // After backward op `op` ran: starts the buckets it completed and lets the started progress.
  Status after_backward_op(int op);
  // Before the first reader of a gradient: starts what is left and waits for every bucket.
  Status finish();
  // Every bucket's all-reduce with no computation around it: the communication time alone.
  Status reduce_all();

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  const BucketOptions& options() const { return options_; }
  Communicator& communicator() const { return communicator_; }

 private:
  Status start(const GradientBucket& bucket);

  Communicator& communicator_;
  Buffer gradients_;
  DType dtype_;
  std::vector<GradientBucket> buckets_;
  BucketOptions options_;
  std::size_t next_ = 0;  // the first bucket not started in this step
  bool in_flight_ = false;
};

}  // namespace tb
