// The data-parallel parts of TrainingWorkload (training_workload.h): the check of a reduced
// network's step across the ranks, and the timings the report's data_parallel details hold.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "models/data_parallel.h"
#include "models/reference_check.h"
#include "workloads/training_workload.h"

namespace tb {
namespace {

// The reduced network's gradients, averaged across the ranks, against one process's on the
// same slices: f32 sums in another order differ by about 1e-7; a low-precision step's loss
// gradient divided by a rank count that is not a power of two rounds once more in bf16
// (2^-9). A missing bucket or average is off by order one.
double data_parallel_tolerance(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 ? 1e-5 : 1e-2;
}
// Small buckets for the reduced network (a few MB of gradients), so that several are reduced
// while its backward runs, as the measured network's are.
constexpr std::size_t kReducedBucketBytes = std::size_t{256} << 10;
// Steps timed for each data-parallel figure, after one untimed.
constexpr int kTimedSteps = 5;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string timing_method() {
  return fmt::format(
      "median of {} steps (after one untimed) of the slowest rank's time, the figures timed in "
      "turn in each round; one_rank_step_s: rank 0 stepping without exchange while the others "
      "wait (the world-size-1 figure, same binary and per-rank batch); local_step_s: every rank "
      "stepping without exchange at once; communication_s: every bucket's all-reduce with no "
      "computation; scaling_efficiency = global samples/s / (world size x samples/s at world "
      "size 1) = one_rank_step_s / step_s; unhidden_communication_s = step_s - local_step_s",
      kTimedSteps);
}

// The measured steps start again from the seed's weights, the same on every rank, and that is
// checked.
Status restart_from_seed_weights(World& world, TrainingStep& step, std::uint64_t seed) {
  TB_RETURN_IF_ERROR(step.initialize_parameters(seed));
  std::string different;
  TB_RETURN_IF_ERROR(compare_weights_across_ranks(world, step, &different));
  if (!different.empty())
    return Status::Failed(
        fmt::format("after re-initialization the ranks' weights differ (first: {})", different));
  return Status::Ok();
}

}  // namespace

KeySpec bucket_mb_key() {
  return omitted_at_default(
      integer_key("bucket_mb", "25",
                  "data parallel: MB of gradients per all-reduce bucket (DDP's bucket_cap_mb)", 1,
                  std::int64_t{1} << 20));
}

KeySpec overlap_key() {
  return omitted_at_default(choice_key(
      "overlap", "1", {"1", "0"},
      "data parallel: 1 reduces each bucket while backward runs, 0 every bucket after it"));
}

nlohmann::json data_parallel_batches(int ranks, std::int64_t per_rank_batch) {
  return {{"world_size", ranks},
          {"per_rank_batch", per_rank_batch},
          {"global_batch", per_rank_batch * ranks}};
}

BucketOptions read_bucket_options(DescriptorReader& reader) {
  return {static_cast<std::size_t>(reader.integer("bucket_mb")) << 20,
          reader.choice("overlap") == "1"};
}

std::string TrainingWorkload::data_parallel_method() const {
  return fmt::format(
      "the reduced network stepped data parallel on each rank's slice of one seeded global "
      "batch ({} KB buckets), its averaged gradients against one process stepping on each "
      "slice alone (per-rank normalization statistics, as DDP without SyncBatchNorm) within "
      "{:g} (relative L2, worst parameter), and every rank's weights bitwise equal after it, "
      "after the validation steps and after the timings (which step each rank alone; the "
      "measured steps then start again from the seed's weights)",
      kReducedBucketBytes >> 10, data_parallel_tolerance(step_options_.dtype));
}

bool TrainingWorkload::check_data_parallel(Validation* result) {
  auto fail = [&](const std::string& message) {
    result->message = "data parallel: " + message;
    return false;
  };
  const int ranks = this->ranks(), rank = world_->rank();
  const ReducedCase global = reduced_case(seed_, ranks);
  const ReducedCase local = reduced_case(seed_, 1);
  std::vector<std::vector<NamedTensor>> slices(static_cast<std::size_t>(ranks));
  std::vector<std::uint64_t> dropout_seeds;
  for (int r = 0; r < ranks; ++r) {
    if (Status status = batch_slice(global.network, global.batch, r, ranks, &slices[r]);
        !status.ok())
      return fail(status.message());
    dropout_seeds.push_back(rank_dropout_seed(step_options_.dropout_seed, r));
  }
  std::unique_ptr<TrainingStep> step;
  std::vector<NamedTensor> got, want;
  Status status =
      prepared_step(*backend_, local.network, rank_options(), slices[rank], seed_, &step);
  if (status.ok())
    status = step->exchange_gradients(communicator_.get(), {kReducedBucketBytes, buckets_.overlap});
  if (status.ok()) status = step->run(/*update=*/true, settings_);
  if (status.ok()) status = step->gradients(&got);
  if (status.ok())
    status = mean_gradients_of_slices(*backend_, local.network, step_options_, slices,
                                      dropout_seeds, seed_, &want);
  std::string different;
  if (status.ok()) status = compare_weights_across_ranks(*world_, *step, &different);
  if (!status.ok()) return fail(status.message());
  if (!different.empty())
    return fail(fmt::format("after a step the ranks' weights differ (first: {})", different));
  const GradientError error = worst_gradient_error(got, want);
  const double tolerance = data_parallel_tolerance(step_options_.dtype);
  result->checked += static_cast<std::int64_t>(got.size());
  if (error.error <= tolerance) return true;
  return fail(
      fmt::format("averaged gradient of {} off one process's on the same slices by "
                  "{:.3g} (relative L2, allowed {:g})",
                  error.parameter, error.error, tolerance));
}

// Each figure is the median over kTimedSteps of the slowest rank's time. The world-size-1
// figure is rank 0 stepping alone while the others wait; the rest run on every rank at once.
// Every round times each figure once, in turn, so that a burst of load elsewhere on the machine
// falls on all of them alike rather than on one.
Status TrainingWorkload::time_data_parallel() {
  World& world = *world_;
  struct Figure {
    Communicator* communicator;  // null: no exchange
    bool overlap, communication_only, rank_zero_only;
    std::vector<double> times = {};
  };
  Communicator* all = communicator_.get();
  enum { kOneRank, kLocal, kCommunication, kOverlapOn, kOverlapOff };
  std::vector<Figure> figures = {{nullptr, true, false, true},
                                 {nullptr, true, false, false},
                                 {all, true, true, false},
                                 {all, true, false, false},
                                 {all, false, false, false}};
  for (int round = 0; round <= kTimedSteps; ++round) {
    for (Figure& figure : figures) {
      TB_RETURN_IF_ERROR(
          step_->exchange_gradients(figure.communicator, {buckets_.bucket_bytes, figure.overlap}));
      const bool here = !figure.rank_zero_only || world.rank() == 0;
      TB_RETURN_IF_ERROR(world.barrier());
      const auto start = std::chrono::steady_clock::now();
      Status status = Status::Ok();
      if (here) {
        status = figure.communication_only ? step_->gradient_exchange()->reduce_all()
                                           : step_->run(/*update=*/true, settings_);
        backend_->synchronize();
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double slowest = world.max(here ? seconds : 0.0);
      TB_RETURN_IF_ERROR(status);
      if (round > 0) figure.times.push_back(slowest);
    }
  }
  TB_RETURN_IF_ERROR(step_->exchange_gradients(communicator_.get(), buckets_));
  // The steps without exchange moved each rank's weights its own way.
  TB_RETURN_IF_ERROR(restart_from_seed_weights(world, *step_, seed_));
  const double alone = median(figures[kOneRank].times), local = median(figures[kLocal].times);
  const double communication = median(figures[kCommunication].times);
  const double with_overlap = median(figures[kOverlapOn].times),
               without_overlap = median(figures[kOverlapOff].times);

  const double batch = static_cast<double>(network_.batch);
  auto mode = [&](double step_s) {
    return nlohmann::json{{"step_s", step_s},
                          {"samples_per_s_per_rank", batch / step_s},
                          {"global_samples_per_s", ranks() * batch / step_s},
                          {"scaling_efficiency", alone / step_s},
                          {"unhidden_communication_s", step_s - local}};
  };
  const std::vector<GradientBucket>& buckets = step_->gradient_exchange()->buckets();
  std::int64_t elements = 0;
  for (const GradientBucket& bucket : buckets) elements += bucket.count;
  data_parallel_ = data_parallel_batches(ranks(), network_.batch);
  data_parallel_.update({{"normalization",
                          "per rank: batch norm uses each rank's own statistics (DDP without "
                          "SyncBatchNorm); running statistics stay per rank"},
                         {"communicator", communicator_->implementation()},
                         {"bucket_bytes", buckets_.bucket_bytes},
                         {"buckets", buckets.size()},
                         {"gradient_bytes", elements * static_cast<std::int64_t>(sizeof(float))},
                         {"overlap", buckets_.overlap},
                         {"method", timing_method()},
                         {"one_rank_step_s", alone},
                         {"one_rank_samples_per_s", batch / alone},
                         {"local_step_s", local},
                         {"communication_s", communication},
                         {"overlap_on", mode(with_overlap)},
                         {"overlap_off", mode(without_overlap)}});
  return Status::Ok();
}

}  // namespace tb
