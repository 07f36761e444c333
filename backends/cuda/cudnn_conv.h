// Convolution through cuDNN's graph (backend) API, the API cuDNN 9 keeps (its legacy
// convolution calls are deprecated): forward, backward-data and backward-weights on NCHW or
// NHWC data in f32 (strict: engines that down-convert to TF32 are refused), tf32, bf16 and f16, all
// with fp32 accumulation. The engine is chosen once per shape by timing the heuristics' candidates
// on seeded data (a network only validation runs takes the first allowed one, untimed:
// ConvOp::first_engine), and cached by the backend; its workspace is the plan's workspace.
#pragma once

#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cudnn_graph.h"

namespace tb::cuda {

// Whether an engine with `notes` may run `op`: f32 is strict (no TF32 down-conversion), every
// dtype accumulates in fp32 (no reduced-precision reduction), Winograd only where the
// descriptor allows it. `reason` says why not.
bool engine_allowed(const ConvOp& op, const EngineNotes& notes, std::string* reason);

// Whether the plan keeps the activations channels-last (NHWC): 16-bit data unless the caller
// asks for plain NCHW (channels_last() in nhwc.h, which the backend's other 4-D ops follow).
bool conv_channels_last(const ConvOp& op);
// Whether the weights stay plain KCRS in the operand and the plan reorders them to KRSC in its
// workspace (and a weight gradient back): a network's step (Layout::native), whose optimizer
// and weight files see plain weights. A single-op benchmark (Layout::any) imports them as KRSC.
bool conv_stages_weights(const ConvOp& op);

// Everything the engine choice depends on, as the cache's key.
std::string conv_engine_key(const ConvOp& op);

// The fastest of the timed candidates (an index into `seconds`), ignoring those that did not
// run (not positive, or NaN); -1 when none ran.
int fastest_candidate(const std::vector<double>& seconds);

// The engine chosen for a shape (its graph, configuration and plan), and the chosen engines by
// conv_engine_key.
struct ConvEngine;
using ConvEngineCache = KeyedCache<ConvEngine>;

Status plan_cudnn_conv(cudnnHandle_t handle, ConvEngineCache& cache, const ConvOp& op,
                       std::unique_ptr<Plan>* out);

}  // namespace tb::cuda
