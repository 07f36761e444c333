#include "backends/cuda/cudnn_conv.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/nhwc.h"
#include "backends/cuda/training_kernels.h"
#include "backends/operands.h"

namespace tb::cuda {
namespace {

constexpr int kMaxCandidates = 8;  // engines timed per shape
constexpr int kTimedRuns = 3;      // per candidate, after one warm-up run
// Tensor ids in the graph and the variant pack: x (or dx), w (or dw), y (or dy); with an
// epilogue the bias, and the intermediates between the fused nodes.
constexpr std::int64_t kX = 1, kW = 2, kY = 3, kBias = 4, kConvOut = 5, kBiased = 6;

// dims are [n, c, h, w] (weights [k, c, r, s]) in either layout; the strides say where. A
// virtual tensor (between fused nodes) is fp32.
Status conv_tensor(std::int64_t uid, DType dtype, std::array<std::int64_t, 4> dims,
                   bool channels_last, BackendDescriptor* out, bool is_virtual = false) {
  const std::int64_t c = dims[1], h = dims[2], w = dims[3];
  const std::vector<std::int64_t> strides =
      channels_last ? std::vector<std::int64_t>{h * w * c, 1, w * c, c}   // NHWC, KRSC
                    : std::vector<std::int64_t>{c * h * w, h * w, w, 1};  // NCHW, KCRS
  const TensorSpec spec{uid,
                        is_virtual ? DType::f32 : dtype,
                        {dims.begin(), dims.end()},
                        strides,
                        /*by_value=*/false,
                        is_virtual};
  return make_tensor(spec, out);
}

// The convolution's operation graph: one node of the op's direction, and for a forward with
// an epilogue the pointwise nodes after it (bias add, ReLU) that cuDNN's runtime fusion runs
// in the same kernel.
struct Graph {
  BackendDescriptor x, w, y, convolution, operation, graph;
  BackendDescriptor bias, conv_out, biased;
  PointwiseNode add, relu;
};

// The graph's tensors: x, w, y, and for an epilogue the bias and the virtual intermediates.
Status make_tensors(const ConvOp& op, Graph* g) {
  const bool nhwc = conv_channels_last(op);
  const std::array<std::int64_t, 4> y_dims = {op.mb, op.oc, op.oh(), op.ow()};
  TB_RETURN_IF_ERROR(conv_tensor(kX, op.dtype, {op.mb, op.ic, op.ih, op.iw}, nhwc, &g->x));
  TB_RETURN_IF_ERROR(conv_tensor(kW, op.dtype, {op.oc, op.ic, op.kh, op.kw}, nhwc, &g->w));
  TB_RETURN_IF_ERROR(conv_tensor(kY, op.dtype, y_dims, nhwc, &g->y));
  if (op.epilogue != ConvEpilogue::none) {
    TB_RETURN_IF_ERROR(conv_tensor(kConvOut, op.dtype, y_dims, nhwc, &g->conv_out, true));
    TB_RETURN_IF_ERROR(
        make_tensor({kBias,
                     op.dtype,
                     {1, op.oc, 1, 1},
                     nhwc ? std::vector<std::int64_t>{op.oc, 1, op.oc, op.oc}  // as y's layout
                          : std::vector<std::int64_t>{op.oc, 1, 1, 1},
                     false,
                     false},
                    &g->bias));
    if (op.epilogue == ConvEpilogue::bias_relu)
      TB_RETURN_IF_ERROR(conv_tensor(kBiased, op.dtype, y_dims, nhwc, &g->biased, true));
  }
  return Status::Ok();
}

// Cross-correlation with the op's padding and strides, accumulating in fp32.
Status make_convolution(const ConvOp& op, BackendDescriptor* convolution) {
  BackendDescriptor& c = *convolution;
  const std::int64_t spatial = 2;
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::array<std::int64_t, 2> padding = {op.ph, op.pw}, strides = {op.sh, op.sw},
                                    dilations = {1, 1};
  TB_RETURN_IF_ERROR(c.create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  TB_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial));
  TB_RETURN_IF_ERROR(c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &accumulate));
  TB_RETURN_IF_ERROR(
      c.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  TB_RETURN_IF_ERROR(
      c.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data()));
  TB_RETURN_IF_ERROR(
      c.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data()));
  TB_RETURN_IF_ERROR(
      c.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations.data()));
  TB_RETURN_IF_ERROR(
      c.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides.data()));
  return c.finalize();
}

Status make_graph(cudnnHandle_t handle, const ConvOp& op, Graph* g) {
  const bool fused = op.epilogue != ConvEpilogue::none,
             relu = op.epilogue == ConvEpilogue::bias_relu;
  TB_RETURN_IF_ERROR(make_tensors(op, g));
  TB_RETURN_IF_ERROR(make_convolution(op, &g->convolution));
  const BackendDescriptor& c = g->convolution;

  // One node of the op's direction; the three kinds differ only in their attribute names.
  struct Attributes {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, convolution, alpha, beta;
  };
  static constexpr Attributes kForward = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
  static constexpr Attributes kBackwardData = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
  static constexpr Attributes kBackwardWeights = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  const Attributes& a = op.direction == ConvDirection::forward         ? kForward
                        : op.direction == ConvDirection::backward_data ? kBackwardData
                                                                       : kBackwardWeights;
  const float alpha = 1.0f, beta = 0.0f;
  BackendDescriptor& o = g->operation;
  TB_RETURN_IF_ERROR(o.create(a.type));
  TB_RETURN_IF_ERROR(o.set(a.x, g->x));
  TB_RETURN_IF_ERROR(o.set(a.w, g->w));
  TB_RETURN_IF_ERROR(o.set(a.y, fused ? g->conv_out : g->y));
  TB_RETURN_IF_ERROR(o.set(a.convolution, c));
  TB_RETURN_IF_ERROR(o.set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha));
  TB_RETURN_IF_ERROR(o.set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta));
  TB_RETURN_IF_ERROR(o.finalize());
  if (!fused) return make_operation_graph(handle, o, &g->graph);
  TB_RETURN_IF_ERROR(
      make_pointwise(CUDNN_POINTWISE_ADD, g->conv_out, &g->bias, relu ? g->biased : g->y, &g->add));
  if (relu)
    TB_RETURN_IF_ERROR(
        make_pointwise(CUDNN_POINTWISE_RELU_FWD, g->biased, nullptr, g->y, &g->relu));
  const cudnnBackendDescriptor_t nodes[] = {o.get(), g->add.operation.get(),
                                            g->relu.operation.get()};
  return make_operation_graph(handle, std::span(nodes, relu ? 3 : 2), &g->graph);
}

// Runs `plan` on x, w, y (by their ids), and the bias where the graph has an epilogue, with
// `workspace`.
Status execute(cudnnHandle_t handle, const BackendDescriptor& plan, void* x, void* w, void* y,
               void* bias, void* workspace) {
  const std::int64_t ids[] = {kX, kW, kY, kBias};
  void* const pointers[] = {x, w, y, bias};
  const std::size_t count = bias ? 4 : 3;
  return execute_plan(handle, plan, std::span(ids, count), std::span(pointers, count), workspace);
}

// A pair of CUDA events for the search's timing, destroyed on every way out.
struct TimingEvents {
  cudaEvent_t start = nullptr, stop = nullptr;
  TimingEvents() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~TimingEvents() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
};

std::size_t elements(std::array<std::int64_t, 4> dims) {
  return static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]);
}

}  // namespace

struct ConvEngine {
  // The finalized execution plan, kept with the graph and configuration it was made from.
  Graph graph;
  BackendDescriptor config, plan;
  std::int64_t workspace = 0;
  std::string description;
};

bool engine_allowed(const ConvOp& op, const EngineNotes& notes, std::string* reason) {
  // cuDNN marks fp32 convolutions on Tensor Cores (TF32) with the tensor-core note, and
  // engines that convert fp32 inputs to a 16-bit format with down-convert (PyTorch filters
  // the same way).
  if (op.dtype == DType::f32 && notes.tensor_core) {
    *reason = "runs fp32 on Tensor Cores (TF32): f32 is strict";
    return false;
  }
  if (notes.down_convert) {
    *reason = "down-converts its inputs";
    return false;
  }
  if (notes.reduced_precision_reduction) {
    *reason = "reduces in reduced precision: every dtype accumulates in fp32";
    return false;
  }
  if (notes.winograd && !op.winograd_allowed) {
    *reason = "Winograd, not allowed by the descriptor";
    return false;
  }
  return true;
}

bool conv_channels_last(const ConvOp& op) {
  return channels_last(op.dtype, op.layout);
}

bool conv_stages_weights(const ConvOp& op) {
  return conv_channels_last(op) && op.layout == Layout::native;
}

std::string conv_engine_key(const ConvOp& op) {
  // An untimed first choice never stands in for a searched one.
  return fmt::format("{} {} mb{} ic{} {}x{} oc{} k{}x{} s{}x{} p{}x{} w{} {} e{} {}",
                     static_cast<int>(op.direction), dtype_name(op.dtype), op.mb, op.ic, op.ih,
                     op.iw, op.oc, op.kh, op.kw, op.sh, op.sw, op.ph, op.pw,
                     op.winograd_allowed ? 1 : 0, conv_channels_last(op) ? "nhwc" : "nchw",
                     static_cast<int>(op.epilogue), op.first_engine ? "first" : "timed");
}

int fastest_candidate(const std::vector<double>& seconds) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(seconds.size()); ++i)
    if (seconds[i] > 0 && (best < 0 || seconds[i] < seconds[best])) best = i;
  return best;
}

namespace {

// Times up to kMaxCandidates allowed engines on seeded data and keeps the fastest.
constexpr const char* kSearchMemory = "cudaMalloc (convolution engine search)";

// A convolution's operands on the device for timing engines, filled with seeded data (zeros
// would time faster than real inputs).
struct SearchOperands {
  DeviceBlock x, w, y, bias;
  void* bias_data = nullptr;  // null without an epilogue
};

Status seed_search_operands(const ConvOp& op, SearchOperands* s) {
  const std::array<std::int64_t, 4> x = {op.mb, op.ic, op.ih, op.iw},
                                    w = {op.oc, op.ic, op.kh, op.kw},
                                    y = {op.mb, op.oc, op.oh(), op.ow()};
  const std::array<std::int64_t, 4> bias = {1, op.epilogue == ConvEpilogue::none ? 0 : op.oc, 1, 1};
  const std::size_t element = dtype_size(storage_dtype(op.dtype));
  TB_RETURN_IF_ERROR(s->x.allocate(elements(x) * element, kSearchMemory));
  TB_RETURN_IF_ERROR(s->w.allocate(elements(w) * element, kSearchMemory));
  TB_RETURN_IF_ERROR(s->y.allocate(elements(y) * element, kSearchMemory));
  TB_RETURN_IF_ERROR(s->bias.allocate(elements(bias) * element, kSearchMemory));
  s->bias_data = elements(bias) > 0 ? s->bias.data() : nullptr;
  for (auto [block, dims, seed] :
       {std::tuple{&s->x, x, 1}, {&s->w, w, 2}, {&s->y, y, 3}, {&s->bias, bias, 4}})
    TB_RETURN_IF_ERROR(
        cuda_status(launch_fill_random(storage_dtype(op.dtype), block->data(),
                                       static_cast<std::int64_t>(elements(dims)), seed, nullptr),
                    "seeding the engine search"));
  return Status::Ok();
}

// Seconds per run of `plan` over kTimedRuns runs after one untimed run, or -1 where it did not
// run.
double time_engine(cudnnHandle_t handle, const BackendDescriptor& plan,
                   std::int64_t workspace_bytes, const SearchOperands& s,
                   const TimingEvents& events) {
  DeviceBlock workspace;
  if (!workspace.allocate(static_cast<std::size_t>(workspace_bytes), kSearchMemory).ok() ||
      !execute(handle, plan, s.x.data(), s.w.data(), s.y.data(), s.bias_data, workspace.data())
           .ok())
    return -1;
  cudaEventRecord(events.start);
  Status status = Status::Ok();
  for (int run = 0; run < kTimedRuns && status.ok(); ++run)
    status =
        execute(handle, plan, s.x.data(), s.w.data(), s.y.data(), s.bias_data, workspace.data());
  cudaEventRecord(events.stop);
  float ms = 0;
  if (status.ok() && cudaEventSynchronize(events.stop) == cudaSuccess &&
      cudaEventElapsedTime(&ms, events.start, events.stop) == cudaSuccess)
    return ms * 1e-3 / kTimedRuns;
  return -1;
}

// The shape's graph and the heuristics' configurations for it: heuristic A's ranking first, then
// the fallback list (either may fail on its own).
Status ranked_configs(cudnnHandle_t handle, const ConvOp& op, Graph* graph,
                      std::vector<BackendDescriptor>* configs) {
  TB_RETURN_IF_ERROR(make_graph(handle, op, graph));
  const Status ranked = heuristic_configs(graph->graph, CUDNN_HEUR_MODE_A, configs);
  const Status fallback = heuristic_configs(graph->graph, CUDNN_HEUR_MODE_FALLBACK, configs);
  if (!configs->empty()) return Status::Ok();
  if (!ranked.ok()) return ranked;
  if (!fallback.ok()) return fallback;
  return Status::Unimplemented("cuDNN: the heuristics offer no engine for this convolution");
}

Status search_engine(cudnnHandle_t handle, const ConvOp& op,
                     std::shared_ptr<const ConvEngine>* out) {
  Graph graph;
  std::vector<BackendDescriptor> configs;
  TB_RETURN_IF_ERROR(ranked_configs(handle, op, &graph, &configs));

  SearchOperands operands;
  TB_RETURN_IF_ERROR(seed_search_operands(op, &operands));

  struct Candidate {
    BackendDescriptor plan;
    std::int64_t workspace = 0;
    EngineIdentity identity;
    std::size_t config_index = 0;
  };
  std::vector<Candidate> candidates;
  std::vector<double> seconds;
  std::vector<std::string> refused;
  const TimingEvents events;
  for (std::size_t index = 0; index < configs.size(); ++index) {
    const BackendDescriptor& config = configs[index];
    if (static_cast<int>(candidates.size()) == kMaxCandidates) break;
    Candidate candidate;
    candidate.config_index = index;
    std::string reason;
    if (!identify(config, &candidate.identity).ok()) continue;
    const bool repeated =
        std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& c) {
          return c.identity.global_index == candidate.identity.global_index;
        });
    if (repeated) continue;  // the fallback list repeats heuristic A's engines
    if (!engine_allowed(op, candidate.identity.notes, &reason)) {
      refused.push_back(fmt::format("{}: {}", candidate.identity.global_index, reason));
      continue;
    }
    if (!make_execution_plan(handle, config, &candidate.plan, &candidate.workspace).ok() ||
        candidate.workspace > kMaxCudnnWorkspace)
      continue;
    const double elapsed =
        time_engine(handle, candidate.plan, candidate.workspace, operands, events);
    // An engine that failed to launch leaves no error for the next one, unless the failure
    // broke the context.
    if (const cudaError_t error = cudaGetLastError(); is_sticky(error))
      return cuda_status(error, "cuDNN engine search");
    candidates.push_back(std::move(candidate));
    seconds.push_back(elapsed);
  }
  const int best = fastest_candidate(seconds);
  if (best < 0) {
    std::string why;
    for (const std::string& line : refused) why += "; engine " + line;
    return Status::Unimplemented(
        fmt::format("cuDNN: no engine ran this convolution ({} configurations, {} timed{})",
                    configs.size(), candidates.size(), why));
  }
  auto engine = std::make_shared<ConvEngine>();
  Candidate& chosen = candidates[best];
  engine->workspace = chosen.workspace;
  engine->description =
      fmt::format("cuDNN graph API engine {} ({}), fastest of {} timed ({:.3f} ms), workspace {} B",
                  chosen.identity.global_index, chosen.identity.notes.describe(), candidates.size(),
                  seconds[best] * 1e3, chosen.workspace);
  engine->plan = std::move(chosen.plan);
  engine->config = std::move(configs[chosen.config_index]);
  engine->graph = std::move(graph);
  *out = std::move(engine);
  return Status::Ok();
}

class CudnnConvPlan final : public CudaPlan {
 public:
  // `epilogue_kernel`: the engine runs the plain convolution and an own kernel adds the
  // epilogue after it (no cuDNN engine fuses it for this shape and dtype).
  CudnnConvPlan(cudnnHandle_t handle, const ConvOp& op, std::shared_ptr<const ConvEngine> engine,
                bool epilogue_kernel)
      : handle_(handle), op_(op), engine_(std::move(engine)), epilogue_kernel_(epilogue_kernel) {
    operands_ = conv_operands(op);
    for (OperandSpec& operand : operands_) operand.dtype = storage_dtype(operand.dtype);
    // Low-precision weight gradients come out of cuDNN in the data's dtype and are cast to
    // the fp32 master gradient after it.
    cast_weights_ =
        op.direction == ConvDirection::backward_weights && storage_dtype(op.dtype) != DType::f32;
    if (cast_weights_) operands_[weights_index()].rounded_to = storage_dtype(op.dtype);
    engine_bytes_ = workspace_aligned(static_cast<std::size_t>(engine_->workspace));
    const std::size_t weight_bytes =
        operands_[weights_index()].elements() * dtype_size(storage_dtype(op.dtype));
    cast_bytes_ = workspace_aligned(cast_weights_ ? weight_bytes : 0);
    channels_last_ = conv_channels_last(op);
    stages_weights_ = conv_stages_weights(op);
    workspace_bytes_ = engine_bytes_ + cast_bytes_ + (stages_weights_ ? weight_bytes : 0);
    implementation_ =
        engine_->description +
        (!channels_last_   ? ", NCHW"
         : stages_weights_ ? ", NHWC / KRSC (weights reordered from KCRS in the workspace)"
                           : ", NHWC / KRSC") +
        (cast_weights_ ? ", dW cast to f32" : "") +
        (op.epilogue == ConvEpilogue::none ? ""
         : epilogue_kernel ? ", bias (and ReLU) by a trainbench kernel after it: no cuDNN engine "
                             "fuses them here"
                           : ", bias (and ReLU) fused in the same graph");
    math_mode_ = op.dtype == DType::tf32  ? "tf32 inputs, fp32 accumulation"
                 : op.dtype == DType::f32 ? "strict fp32 (no TF32 engines)"
                                          : "fp32 accumulation";
  }

  // Channels-last activations are converted on the host from and to the callers' plain
  // NCHW (the bias is one value per channel in either); weights too, unless a network's step
  // keeps them plain and the plan reorders them itself.
  bool stored_channels_last(int index) const override {
    return CudaPlan::stored_channels_last(index) && !(stages_weights_ && index == weights_index());
  }

  Status run(std::span<const Buffer> operands, Buffer workspace, cudaStream_t stream) override {
    TB_CUDNN(cudnnSetStream(handle_, stream));  // the kernels around it run on the same stream
    const BoundOperands b(operands_, operands);
    auto data = [&](std::string_view name) { return b.buffer(name).data; };
    char* const base = static_cast<char*>(workspace.data);
    void* const scratch = base;
    void* const cast_source = base + engine_bytes_;
    void* const staged = base + engine_bytes_ + cast_bytes_;
    // The weights as cuDNN reads them: plain KCRS reordered to KRSC where the plan stages them.
    auto weights = [&](const Buffer& plain) -> Status {
      if (!stages_weights_) return Status::Ok();
      return cuda_status(reorder_weights(plain.data, staged, /*to_krsc=*/true, stream),
                         "weights to KRSC");
    };
    const bool reads_weights = op_.direction != ConvDirection::backward_weights;
    void* const w = stages_weights_ || !reads_weights ? staged : data("weights");
    switch (op_.direction) {
      case ConvDirection::forward: {
        TB_RETURN_IF_ERROR(weights(b.buffer("weights")));
        if (op_.epilogue == ConvEpilogue::none)
          return execute(handle_, engine_->plan, data("src"), w, data("dst"), nullptr, scratch);
        if (!epilogue_kernel_)
          return execute(handle_, engine_->plan, data("src"), w, data("dst"), data("bias"),
                         scratch);
        TB_RETURN_IF_ERROR(
            execute(handle_, engine_->plan, data("src"), w, data("dst"), nullptr, scratch));
        const std::int64_t plane = op_.oh() * op_.ow();
        return cuda_status(
            launch_add_bias(storage_dtype(op_.dtype), op_.mb * op_.oc * plane, op_.oc,
                            channels_last_ ? 1 : plane, op_.epilogue == ConvEpilogue::bias_relu,
                            data("bias"), data("dst"), stream),
            "convolution bias");
      }
      case ConvDirection::backward_data:
        TB_RETURN_IF_ERROR(weights(b.buffer("weights")));
        return execute(handle_, engine_->plan, data("diff_src"), w, data("diff_dst"), nullptr,
                       scratch);
      case ConvDirection::backward_weights: {
        // cuDNN writes dW in the data's dtype (KRSC where staged); it is reordered to KCRS and
        // cast to the fp32 master gradient after it.
        void* const diff_weights = data("diff_weights");
        void* const dw = stages_weights_ ? staged : cast_weights_ ? cast_source : diff_weights;
        TB_RETURN_IF_ERROR(
            execute(handle_, engine_->plan, data("src"), dw, data("diff_dst"), nullptr, scratch));
        void* const plain = cast_weights_ ? cast_source : diff_weights;
        if (stages_weights_)
          TB_RETURN_IF_ERROR(cuda_status(reorder_weights(dw, plain, /*to_krsc=*/false, stream),
                                         "weight gradient to KCRS"));
        if (!cast_weights_) return Status::Ok();
        const CastOp cast{static_cast<std::int64_t>(b.spec("diff_weights").elements()), op_.dtype,
                          DType::f32};
        return cuda_status(launch_cast(cast, plain, diff_weights, stream), "weight-gradient cast");
      }
    }
    return Status::Ok();
  }

 private:
  cudnnHandle_t handle_;
  ConvOp op_;
  std::shared_ptr<const ConvEngine> engine_;
  bool epilogue_kernel_ = false;
  bool cast_weights_ = false;
  bool stages_weights_ = false;
  std::size_t engine_bytes_ = 0, cast_bytes_ = 0;

  int weights_index() const {
    return operand_index(
        operands_, op_.direction == ConvDirection::backward_weights ? "diff_weights" : "weights");
  }
  cudaError_t reorder_weights(const void* from, void* to, bool to_krsc, cudaStream_t stream) const {
    return launch_convert_channels(dtype_size(storage_dtype(op_.dtype)), op_.oc, op_.ic, op_.kh,
                                   op_.kw, from, to, to_krsc, stream);
  }
};

// The cached engine for the op's shape, or a new search (cached when it finds one).
// A validation-only network's engine: the first allowed configuration of heuristic A's ranking,
// then the fallback list's, that builds a plan, untimed (its speed is never reported).
Status first_allowed_engine(cudnnHandle_t handle, const ConvOp& op,
                            std::shared_ptr<const ConvEngine>* out) {
  Graph graph;
  std::vector<BackendDescriptor> configs;
  TB_RETURN_IF_ERROR(ranked_configs(handle, op, &graph, &configs));
  std::string refused;
  for (BackendDescriptor& config : configs) {
    EngineIdentity identity;
    std::string reason;
    if (!identify(config, &identity).ok()) continue;
    if (!engine_allowed(op, identity.notes, &reason)) {
      refused += fmt::format("; engine {}: {}", identity.global_index, reason);
      continue;
    }
    auto engine = std::make_shared<ConvEngine>();
    if (!make_execution_plan(handle, config, &engine->plan, &engine->workspace).ok() ||
        engine->workspace > kMaxCudnnWorkspace)
      continue;
    engine->description = fmt::format(
        "cuDNN graph API engine {} ({}), the heuristics' first allowed, untimed (a network only "
        "validation runs), workspace {} B",
        identity.global_index, identity.notes.describe(), engine->workspace);
    engine->config = std::move(config);
    engine->graph = std::move(graph);
    *out = std::move(engine);
    return Status::Ok();
  }
  return Status::Unimplemented(fmt::format(
      "cuDNN: no engine builds this convolution ({} configurations{})", configs.size(), refused));
}

Status find_engine(cudnnHandle_t handle, ConvEngineCache& cache, const ConvOp& op,
                   std::shared_ptr<const ConvEngine>* out) {
  const std::string key = conv_engine_key(op);
  *out = cache.find(key);
  if (*out) return Status::Ok();
  TB_RETURN_IF_ERROR(op.first_engine ? first_allowed_engine(handle, op, out)
                                     : search_engine(handle, op, out));
  cache.insert(key, *out);
  return Status::Ok();
}

}  // namespace

Status plan_cudnn_conv(cudnnHandle_t handle, ConvEngineCache& cache, const ConvOp& op,
                       std::unique_ptr<Plan>* out) {
  if (op.epilogue != ConvEpilogue::none && op.direction != ConvDirection::forward)
    return Status::InvalidArgument("a convolution epilogue is for the forward direction");
  if (!kernel_dtype(storage_dtype(op.dtype)))
    return Status::Unimplemented(fmt::format(
        "cuda: convolution runs in f32, tf32, bf16 and f16, not {}", dtype_name(op.dtype)));
  std::shared_ptr<const ConvEngine> engine;
  Status status = find_engine(handle, cache, op, &engine);
  const bool epilogue_kernel =
      status.code() == StatusCode::unimplemented && op.epilogue != ConvEpilogue::none;
  if (epilogue_kernel) {  // no engine fuses the epilogue: the plain convolution, then a kernel
    ConvOp plain = op;
    plain.epilogue = ConvEpilogue::none;
    status = find_engine(handle, cache, plain, &engine);
  }
  TB_RETURN_IF_ERROR(status);
  *out = std::make_unique<CudnnConvPlan>(handle, op, std::move(engine), epilogue_kernel);
  return Status::Ok();
}

}  // namespace tb::cuda
