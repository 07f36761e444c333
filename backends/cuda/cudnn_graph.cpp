#include "backends/cuda/cudnn_graph.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

namespace tb::cuda {

Status cudnn_status(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  const std::string message = fmt::format("{}: {}", what, cudnnGetErrorString(status));
  const int code = static_cast<int>(status);
  if (code >= 3000 && code < 4000) return Status::Unimplemented(message);  // NOT_SUPPORTED_*
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    return Status::OutOfMemory(message);
  return Status::LibraryFailed(message);
}

std::string cudnn_runtime_version() {
  const std::size_t v = cudnnGetVersion();
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& other) noexcept
    : d_(std::exchange(other.d_, nullptr)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& other) noexcept {
  std::swap(d_, other.d_);
  return *this;
}

BackendDescriptor::~BackendDescriptor() {
  if (d_) cudnnBackendDestroyDescriptor(d_);
}

Status BackendDescriptor::create(cudnnBackendDescriptorType_t type) {
  return cudnn_status(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
}

Status BackendDescriptor::set(cudnnBackendAttributeName_t name, const BackendDescriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

Status BackendDescriptor::finalize() {
  return cudnn_status(cudnnBackendFinalize(d_), "cudnnBackendFinalize");
}

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::i32:
      return CUDNN_DATA_INT32;
    default:
      return CUDNN_DATA_FLOAT;  // f32 and tf32 data
  }
}

Status make_tensor(const TensorSpec& spec, BackendDescriptor* out) {
  const cudnnDataType_t type = spec.boolean ? CUDNN_DATA_BOOLEAN : cudnn_type(spec.dtype);
  const std::int64_t alignment = 16;
  const auto rank = static_cast<std::int64_t>(spec.dims.size());
  TB_RETURN_IF_ERROR(out->create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  TB_RETURN_IF_ERROR(
      out->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, spec.dims.data()));
  TB_RETURN_IF_ERROR(
      out->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, spec.strides.data()));
  TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &spec.uid));
  TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  const bool yes = true;
  if (spec.by_value)
    TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes));
  if (spec.is_virtual)
    TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes));
  return out->finalize();
}

Status make_operation_graph(cudnnHandle_t handle, const BackendDescriptor& operation,
                            BackendDescriptor* graph) {
  const cudnnBackendDescriptor_t operations[] = {operation.get()};
  return make_operation_graph(handle, operations, graph);
}

Status make_operation_graph(cudnnHandle_t handle,
                            std::span<const cudnnBackendDescriptor_t> operations,
                            BackendDescriptor* graph) {
  TB_RETURN_IF_ERROR(graph->create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  TB_RETURN_IF_ERROR(graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                static_cast<std::int64_t>(operations.size()), operations.data()));
  TB_RETURN_IF_ERROR(graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  return graph->finalize();
}

Status make_pointwise(cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                      const BackendDescriptor* b, const BackendDescriptor& y, PointwiseNode* out) {
  return make_pointwise({.mode = mode}, x, b, nullptr, y, out);
}

Status make_pointwise(const PointwiseMath& math, const BackendDescriptor& x,
                      const BackendDescriptor* b, const BackendDescriptor* t,
                      const BackendDescriptor& y, PointwiseNode* out) {
  TB_RETURN_IF_ERROR(out->math.create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  TB_RETURN_IF_ERROR(
      out->math.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &math.mode));
  TB_RETURN_IF_ERROR(
      out->math.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math.precision));
  if (math.axis >= 0)
    TB_RETURN_IF_ERROR(out->math.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &math.axis));
  TB_RETURN_IF_ERROR(out->math.finalize());
  BackendDescriptor& o = out->operation;
  TB_RETURN_IF_ERROR(o.create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, out->math));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b) TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  if (t) TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  return o.finalize();
}

Status make_matmul(const BackendDescriptor& a, const BackendDescriptor& b,
                   const BackendDescriptor& c, const MatmulOverrides& overrides,
                   PointwiseNode* out) {
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  TB_RETURN_IF_ERROR(out->math.create(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
  TB_RETURN_IF_ERROR(out->math.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  TB_RETURN_IF_ERROR(out->math.finalize());
  BackendDescriptor& o = out->operation;
  TB_RETURN_IF_ERROR(o.create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, out->math));
  if (overrides.m)
    TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *overrides.m));
  if (overrides.n)
    TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *overrides.n));
  if (overrides.k)
    TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *overrides.k));
  return o.finalize();
}

Status make_sum(const BackendDescriptor& x, const BackendDescriptor& y, PointwiseNode* out) {
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
  TB_RETURN_IF_ERROR(out->math.create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
  TB_RETURN_IF_ERROR(
      out->math.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add));
  TB_RETURN_IF_ERROR(
      out->math.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  TB_RETURN_IF_ERROR(out->math.finalize());
  BackendDescriptor& o = out->operation;
  TB_RETURN_IF_ERROR(o.create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
  TB_RETURN_IF_ERROR(o.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, out->math));
  return o.finalize();
}

Status make_reshape(const BackendDescriptor& x, const BackendDescriptor& y,
                    BackendDescriptor* out) {
  TB_RETURN_IF_ERROR(out->create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));
  TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x));
  TB_RETURN_IF_ERROR(out->set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y));
  return out->finalize();
}

Status heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                         std::vector<BackendDescriptor>* out) {
  BackendDescriptor heuristics;
  TB_RETURN_IF_ERROR(heuristics.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  TB_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  TB_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  TB_RETURN_IF_ERROR(heuristics.finalize());
  std::int64_t count = 0;
  TB_CUDNN(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<BackendDescriptor> configs(static_cast<std::size_t>(count));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (BackendDescriptor& config : configs) {
    TB_RETURN_IF_ERROR(config.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(config.get());
  }
  std::int64_t returned = 0;
  TB_CUDNN(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()));
  configs.resize(static_cast<std::size_t>(std::min(returned, count)));
  for (BackendDescriptor& config : configs) out->push_back(std::move(config));
  return Status::Ok();
}

std::string EngineNotes::describe() const {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(tensor_core, "tensor core");
  add(down_convert, "down-converts inputs");
  add(reduced_precision_reduction, "reduced-precision reduction");
  add(fft, "FFT");
  add(winograd, "Winograd");
  add(nondeterministic, "nondeterministic");
  return out.empty() ? "none" : out;
}

Status identify(const BackendDescriptor& config, EngineIdentity* out) {
  BackendDescriptor engine;
  TB_RETURN_IF_ERROR(engine.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t raw = engine.get();
  std::int64_t count = 0;
  TB_CUDNN(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw));
  TB_CUDNN(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                    &count, &out->global_index));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  TB_CUDNN(cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                    CUDNN_TYPE_NUMERICAL_NOTE, notes.size(), &count, notes.data()));
  for (std::int64_t i = 0; i < std::min<std::int64_t>(count, notes.size()); ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        out->notes.tensor_core = true;
        break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        out->notes.down_convert = true;
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        out->notes.reduced_precision_reduction = true;
        break;
      case CUDNN_NUMERICAL_NOTE_FFT:
        out->notes.fft = true;
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        out->notes.nondeterministic = true;
        break;
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
        out->notes.winograd = true;
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

Status make_execution_plan(cudnnHandle_t handle, const BackendDescriptor& config,
                           BackendDescriptor* plan, std::int64_t* workspace) {
  TB_RETURN_IF_ERROR(plan->create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  TB_RETURN_IF_ERROR(plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  TB_RETURN_IF_ERROR(plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config));
  TB_RETURN_IF_ERROR(plan->finalize());
  std::int64_t count = 0;
  TB_CUDNN(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                    CUDNN_TYPE_INT64, 1, &count, workspace));
  return Status::Ok();
}

Status first_buildable_plan(cudnnHandle_t handle, const BackendDescriptor& graph,
                            bool fp32_accumulation, std::string_view what, BuiltPlan* out) {
  std::vector<BackendDescriptor> configs;
  const Status ranked = heuristic_configs(graph, CUDNN_HEUR_MODE_A, &configs);
  const Status fallback = heuristic_configs(graph, CUDNN_HEUR_MODE_FALLBACK, &configs);
  if (!ranked.ok() && !fallback.ok()) return ranked;
  Status last = Status::Unimplemented(fmt::format("cuDNN: no {} engine for this graph", what));
  for (BackendDescriptor& config : configs) {
    EngineIdentity engine;
    if (!identify(config, &engine).ok()) engine = {};
    if (fp32_accumulation &&
        (engine.notes.down_convert || engine.notes.reduced_precision_reduction)) {
      last = Status::Unimplemented(
          fmt::format("cuDNN: the {} engine {} does not accumulate in fp32 ({})", what,
                      engine.global_index, engine.notes.describe()));
      continue;
    }
    BackendDescriptor plan;
    std::int64_t workspace = 0;
    last = make_execution_plan(handle, config, &plan, &workspace);
    if (!last.ok()) continue;
    if (workspace > kMaxCudnnWorkspace) {
      last = Status::Unimplemented(
          fmt::format("cuDNN: the {} engine wants {} B of workspace", what, workspace));
      continue;
    }
    out->engine = engine;
    out->plan = std::move(plan);
    out->config = std::move(config);
    out->workspace = workspace;
    return Status::Ok();
  }
  return last;
}

Status execute_plan(cudnnHandle_t handle, const BackendDescriptor& plan,
                    std::span<const std::int64_t> ids, std::span<void* const> pointers,
                    void* workspace) {
  if (ids.size() != pointers.size())
    return Status::InvalidArgument("cuDNN variant pack: one pointer per tensor id");
  BackendDescriptor pack;
  TB_RETURN_IF_ERROR(pack.create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  const auto count = static_cast<std::int64_t>(ids.size());
  TB_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, pointers.data()));
  TB_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, ids.data()));
  TB_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  TB_RETURN_IF_ERROR(pack.finalize());
  return cudnn_status(cudnnBackendExecute(handle, plan.get(), pack.get()), "cudnnBackendExecute");
}

}  // namespace tb::cuda
