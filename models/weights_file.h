// Tensors saved and loaded by name in the safetensors format, so PyTorch (or anything that
// reads safetensors) loads trainbench's weights and batches and trainbench loads its results:
//   8 bytes    little-endian u64 N, the header's length
//   N bytes    JSON: {"name": {"dtype": "F32"|"F64"|"I64", "shape": [..],
//                              "data_offsets": [begin, end]}, ...}
//   the data   each tensor's values, little-endian, row-major, at its offsets
#pragma once

#include <string>
#include <vector>

#include "backends/status.h"
#include "models/training_step.h"

namespace tb {

// Floating tensors stored as `dtype` (f32 or f64), integer ones as I64. Written atomically.
Status save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        DType dtype);
// A missing, truncated or malformed file is an InvalidArgument naming the path and the flaw.
Status load_safetensors(const std::string& path, std::vector<NamedTensor>* out);

}  // namespace tb
