// What every cuDNN graph (backend API) here shares: cuDNN statuses as Status, descriptors that
// destroy themselves, tensors, one-node operation graphs, the heuristics' engine
// configurations with their numerical notes, execution plans and their variant packs.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace tb::cuda {

// NOT_SUPPORTED_* is unimplemented, an allocation failure out of memory, the rest failed.
Status cudnn_status(cudnnStatus_t status, const char* what);
#define TB_CUDNN(call) TB_RETURN_IF_ERROR(::tb::cuda::cudnn_status((call), #call))

// "9.19.0" from cudnnGetVersion(): the library that runs, not the headers it was built with.
std::string cudnn_runtime_version();

// A backend descriptor, destroyed with its owner.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  BackendDescriptor(BackendDescriptor&& other) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept;
  ~BackendDescriptor();
  Status create(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return d_; }
  template <typename T>
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
             const T* values) {
    return cudnn_status(cudnnBackendSetAttribute(d_, name, type, count, values),
                        "cudnnBackendSetAttribute");
  }
  Status set(cudnnBackendAttributeName_t name, const BackendDescriptor& value);
  Status finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// f32 and tf32 data are CUDNN_DATA_FLOAT, i32 INT32, bf16 and f16 themselves.
cudnnDataType_t cudnn_type(DType dtype);

// A tensor of the graph: its id in the variant pack, dims and strides in elements; a by-value
// tensor is a host scalar handed over with the variant pack (a scale); a virtual one is an
// intermediate between two nodes of a fused graph, never in memory.
struct TensorSpec {
  std::int64_t uid = 0;
  DType dtype = DType::f32;
  std::vector<std::int64_t> dims, strides;
  bool by_value = false;
  bool is_virtual = false;
  bool boolean = false;  // a mask between pointwise nodes: CUDNN_DATA_BOOLEAN, whatever `dtype`
};
Status make_tensor(const TensorSpec& spec, BackendDescriptor* out);

// The operation graph of finalized operation nodes (one, or a fused chain).
Status make_operation_graph(cudnnHandle_t handle, const BackendDescriptor& operation,
                            BackendDescriptor* graph);
Status make_operation_graph(cudnnHandle_t handle,
                            std::span<const cudnnBackendDescriptor_t> operations,
                            BackendDescriptor* graph);

// A pointwise node y = mode(x) or mode(x, b) computing in fp32, with its pointwise descriptor
// (the math descriptor of a matmul or reduction node too).
struct PointwiseNode {
  BackendDescriptor math, operation;
};
Status make_pointwise(cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                      const BackendDescriptor* b, const BackendDescriptor& y, PointwiseNode* out);
// The same with the mode's math precision (INT32 for GEN_INDEX, BOOLEAN for comparisons), its
// axis (GEN_INDEX) and a third input t (BINARY_SELECT: y = t ? x : b).
struct PointwiseMath {
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;
  cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  std::int64_t axis = -1;  // GEN_INDEX only
};
Status make_pointwise(const PointwiseMath& math, const BackendDescriptor& x,
                      const BackendDescriptor* b, const BackendDescriptor* t,
                      const BackendDescriptor& y, PointwiseNode* out);

// A batched matmul node c = a b computing in fp32, its m, n and k cut per batch by the int32
// tensors given (sequence lengths); null for none. `out` holds its matmul descriptor too.
struct MatmulOverrides {
  const BackendDescriptor *m = nullptr, *n = nullptr, *k = nullptr;
};
Status make_matmul(const BackendDescriptor& a, const BackendDescriptor& b,
                   const BackendDescriptor& c, const MatmulOverrides& overrides,
                   PointwiseNode* out);
// A sum over the dimensions where y has extent 1 (fp32).
Status make_sum(const BackendDescriptor& x, const BackendDescriptor& y, PointwiseNode* out);
// y, a view of x with other dims, strides or dtype (a transpose by strides).
Status make_reshape(const BackendDescriptor& x, const BackendDescriptor& y, BackendDescriptor* out);

// The engine configurations the heuristics of `mode` rank for `graph`, best first, appended.
Status heuristic_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode,
                         std::vector<BackendDescriptor>* out);

// What cuDNN says about an engine's numerics (CUDNN_ATTR_ENGINE_NUMERICAL_NOTE).
struct EngineNotes {
  bool tensor_core = false, down_convert = false, reduced_precision_reduction = false, fft = false,
       winograd = false, nondeterministic = false;
  std::string describe() const;  // "tensor core, winograd", or "none"
};
struct EngineIdentity {
  std::int64_t global_index = -1;
  EngineNotes notes;
};
Status identify(const BackendDescriptor& config, EngineIdentity* out);

Status make_execution_plan(cudnnHandle_t handle, const BackendDescriptor& config,
                           BackendDescriptor* plan, std::int64_t* workspace);

// The most workspace a cuDNN engine may ask for; more is refused like an engine that fails.
inline constexpr std::int64_t kMaxCudnnWorkspace = std::int64_t{1} << 30;
// Workspace regions after a cuDNN engine's start on this boundary.
inline std::size_t workspace_aligned(std::size_t bytes) {
  constexpr std::size_t kAlignment = 256;
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// A plan of the first engine that builds one for `graph`, from heuristic A's ranking then the
// fallback list, with at most kMaxCudnnWorkspace bytes of workspace (ops with no engine search:
// fused attention, batch norm). With `fp32_accumulation`, engines cuDNN notes as down-converting
// their inputs or reducing in reduced precision are passed over, as for convolutions.
// Unimplemented, with cuDNN's reason, when none is left.
struct BuiltPlan {
  BackendDescriptor config, plan;
  std::int64_t workspace = 0;
  EngineIdentity engine;
};
Status first_buildable_plan(cudnnHandle_t handle, const BackendDescriptor& graph,
                            bool fp32_accumulation, std::string_view what, BuiltPlan* out);

// Entries costly to build (an engine search, a graph and its plan) by a key of everything they
// depend on: a network's repeated shapes are built once. Owned by the backend for its lifetime,
// so that their plans go before the cuDNN handle.
template <class Entry>
class KeyedCache {
 public:
  std::shared_ptr<const Entry> find(const std::string& key) const {
    const auto found = entries_.find(key);
    return found == entries_.end() ? nullptr : found->second;
  }
  void insert(const std::string& key, std::shared_ptr<const Entry> entry) {
    entries_[key] = std::move(entry);
  }

 private:
  std::map<std::string, std::shared_ptr<const Entry>> entries_;
};

// Runs `plan` with pointers[i] bound to the tensor whose id is ids[i].
Status execute_plan(cudnnHandle_t handle, const BackendDescriptor& plan,
                    std::span<const std::int64_t> ids, std::span<void* const> pointers,
                    void* workspace);

}  // namespace tb::cuda
