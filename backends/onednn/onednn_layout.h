// Which activation layout a network's layers exchange on cpu-onednn, decided by asking oneDNN
// rather than assumed: its AVX2 kernels take 8-channel blocks, its AVX-512 ones 16, its AMX
// (brgemm) bf16 kernels nhwc, and a layout its kernels do not take runs reference kernels
// 10-50x slower. Also what counts as a reference kernel.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "backends/ops.h"

namespace tb::onednn {

using tag = dnnl::memory::format_tag;

// oneDNN's reference (slow, obvious) implementations: a `ref` token in the name ("ref:any",
// "bnorm_ref:any", "gemm:ref"), or a generic `:any` one that is not a JIT kernel.
bool is_reference_implementation(std::string_view implementation);

std::string tag_name(tag layout);

// One op that was tried in a candidate layout, and what oneDNN gave it.
struct LayoutProbe {
  std::string op;              // "conv 3x3 backward_weights", "batch_norm+relu backward"
  std::string implementation;  // impl_info_str, or why none was created
  bool optimized = false;
};

struct ActivationLayout {
  tag blocked = tag::nchw;          // what a tensor whose channels divide into `block` uses
  dnnl::memory::dim block = 0;      // channels per block; 0 when not blocked (nhwc, nchw)
  std::string reason;               // what oneDNN asked for and what the probes found
  std::vector<LayoutProbe> probes;  // of the chosen layout
  bool usable = true;               // false when oneDNN has no kernels for the dtype at all

  // The layout of a tensor with `channels` channels (a blocked layout needs whole blocks; a
  // 3-channel image stays plain and the convolution reads it so).
  tag for_channels(dnnl::memory::dim channels) const;
};

// Asks oneDNN which layout a forward-training convolution wants on a representative ResNet
// shape, then checks that the ops a network runs (the three convolution directions, the
// 3-channel stem, 1x1 and strided convolutions, batch norm with its fused ReLU both ways, max
// and average pooling both ways, ReLU and add) get optimized kernels in it, falling back to
// nhwc, then nchw, where they do not. Called once per dtype.
ActivationLayout choose_activation_layout(const dnnl::engine& engine, dnnl::memory::data_type type);

// The layouts a single op tries, in order, when its kernel in the shared layout is a
// reference one: that layout, then nhwc, then nchw (the op then reorders its operands).
std::vector<tag> fallback_layouts(tag shared);

}  // namespace tb::onednn
