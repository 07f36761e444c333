#include "backends/onednn/onednn_layout.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include <fmt/format.h>

#include "backends/onednn/onednn_api.h"
#include "backends/onednn/onednn_plan.h"

namespace tb::onednn {
namespace {

using dnnl::memory;
using dims = memory::dims;

// The layouts trainbench's layers can exchange, with their channel block.
struct KnownLayout {
  tag layout;
  memory::dim block;
};
constexpr KnownLayout kKnownLayouts[] = {
    {tag::nChw16c, 16}, {tag::nChw8c, 8}, {tag::nChw4c, 4}, {tag::nhwc, 0}, {tag::nchw, 0}};

std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> tokens(1);
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      tokens.back() += c;
    } else if (!tokens.back().empty()) {
      tokens.emplace_back();
    }
  }
  if (tokens.back().empty()) tokens.pop_back();
  return tokens;
}

memory::desc in_layout(const dims& shape, memory::data_type type, const ActivationLayout& layout,
                       memory::dim channels) {
  return memory::desc(shape, type, layout.for_channels(channels));
}

// One probe: builds a primitive descriptor and reports its implementation. A primitive
// oneDNN cannot create in this layout counts as not optimized.
LayoutProbe probe(const std::string& op, const std::function<std::string()>& create) {
  LayoutProbe result{op, "", false};
  try {
    result.implementation = create();
    result.optimized = !is_reference_implementation(result.implementation);
  } catch (const dnnl::error& e) {
    result.implementation = fmt::format("none ({})", e.what());
  }
  return result;
}

// Convolutions of ResNet-50's kinds: 3x3, 1x1, strided 3x3, and the 7x7 stem on a
// 3-channel image (its backward data is never needed: nothing is below the image).
void add_conv_probes(const dnnl::engine& engine, memory::data_type type,
                     const ActivationLayout& layout, std::vector<LayoutProbe>& probes) {
  const dnnl::primitive_attr attr = base_attr();
  const memory::data_type weights_grad = memory::data_type::f32;
  struct ConvShape {
    const char* name;
    memory::dim mb, ic, oc, size, kernel, stride, pad;
    bool backward_data;
  };
  const ConvShape shapes[] = {{"conv 3x3", 16, 64, 64, 28, 3, 1, 1, true},
                              {"conv 1x1", 16, 256, 64, 14, 1, 1, 0, true},
                              {"conv 3x3 stride 2", 16, 128, 128, 28, 3, 2, 1, true},
                              {"conv 7x7 stem (3 channels)", 16, 3, 64, 112, 7, 2, 3, false}};
  for (const ConvShape& c : shapes) {
    const memory::dim out = (c.size + 2 * c.pad - c.kernel) / c.stride + 1;
    const dims src_dims = {c.mb, c.ic, c.size, c.size}, dst_dims = {c.mb, c.oc, out, out},
               weight_dims = {c.oc, c.ic, c.kernel, c.kernel}, strides = {c.stride, c.stride},
               padding = {c.pad, c.pad};
    const memory::desc src = in_layout(src_dims, type, layout, c.ic),
                       dst = in_layout(dst_dims, type, layout, c.oc),
                       weights(weight_dims, type, tag::any),
                       diff_weights(weight_dims, weights_grad, tag::any);
    const auto algorithm = dnnl::algorithm::convolution_direct;
    auto forward = [&] {
      return api::conv_forward(engine, dnnl::prop_kind::forward_training, algorithm, src, weights,
                               {}, dst, strides, padding, padding, attr);
    };
    probes.push_back(probe(fmt::format("{} forward", c.name),
                           [&] { return std::string(forward().impl_info_str()); }));
    if (c.backward_data)
      probes.push_back(probe(fmt::format("{} backward_data", c.name), [&] {
        return std::string(api::conv_backward_data(engine, algorithm, src, weights, dst, strides,
                                                   padding, padding, attr, forward())
                               .impl_info_str());
      }));
    probes.push_back(probe(fmt::format("{} backward_weights", c.name), [&] {
      return std::string(api::conv_backward_weights(engine, algorithm, src, diff_weights, dst,
                                                    strides, padding, padding, attr, forward())
                             .impl_info_str());
    }));
  }
}

// Batch norm with its fused ReLU, as every ResNet block runs it.
void add_batch_norm_probes(const dnnl::engine& engine, memory::data_type type,
                           const ActivationLayout& layout, std::vector<LayoutProbe>& probes) {
  const dnnl::primitive_attr attr = base_attr();
  const memory::desc data = in_layout({16, 64, 28, 28}, type, layout, 64);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift |
                     dnnl::normalization_flags::fuse_norm_relu;
  auto forward = [&] {
    return api::batch_norm_forward(engine, dnnl::prop_kind::forward_training, data, 1e-5f, flags,
                                   attr);
  };
  probes.push_back(
      probe("batch_norm+relu forward", [&] { return std::string(forward().impl_info_str()); }));
  probes.push_back(probe("batch_norm+relu backward", [&] {
    return std::string(
        api::batch_norm_backward(engine, data, 1e-5f, flags, attr, forward()).impl_info_str());
  }));
}

// Max pooling after the stem and the global average pool before the classifier.
void add_pool_probes(const dnnl::engine& engine, memory::data_type type,
                     const ActivationLayout& layout, std::vector<LayoutProbe>& probes) {
  const dnnl::primitive_attr attr = base_attr();
  struct PoolShape {
    const char* name;
    dnnl::algorithm algorithm;
    memory::dim channels, size, kernel, stride, pad;
  };
  const PoolShape pools[] = {
      {"max pool 3x3 stride 2", dnnl::algorithm::pooling_max, 64, 56, 3, 2, 1},
      {"global average pool", dnnl::algorithm::pooling_avg_exclude_padding, 512, 7, 7, 1, 0}};
  for (const PoolShape& p : pools) {
    const memory::dim out = (p.size + 2 * p.pad - p.kernel) / p.stride + 1;
    const memory::desc src = in_layout({16, p.channels, p.size, p.size}, type, layout, p.channels),
                       dst = in_layout({16, p.channels, out, out}, type, layout, p.channels);
    const dims strides = {p.stride, p.stride}, kernel = {p.kernel, p.kernel},
               padding = {p.pad, p.pad};
    auto forward = [&] {
      return api::pooling_forward(engine, dnnl::prop_kind::forward_training, p.algorithm, src, dst,
                                  strides, kernel, padding, padding, attr);
    };
    probes.push_back(probe(fmt::format("{} forward", p.name),
                           [&] { return std::string(forward().impl_info_str()); }));
    probes.push_back(probe(fmt::format("{} backward", p.name), [&] {
      return std::string(api::pooling_backward(engine, p.algorithm, src, dst, strides, kernel,
                                               padding, padding, attr, forward())
                             .impl_info_str());
    }));
  }
}

// ReLU and add run on the flat tensor, whatever its layout.
void add_eltwise_probes(const dnnl::engine& engine, memory::data_type type,
                        std::vector<LayoutProbe>& probes) {
  const dnnl::primitive_attr attr = base_attr();
  const memory::desc flat({16 * 64 * 28 * 28}, type, tag::x);
  const auto relu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  auto forward = [&] {
    return api::eltwise_forward(engine, dnnl::prop_kind::forward_training, relu, flat, attr);
  };
  probes.push_back(probe("relu forward", [&] { return std::string(forward().impl_info_str()); }));
  probes.push_back(probe("relu backward", [&] {
    return std::string(api::eltwise_backward(engine, relu, flat, attr, forward()).impl_info_str());
  }));
  probes.push_back(probe("add", [&] {
    return std::string(
        api::binary(engine, dnnl::algorithm::binary_add, flat, flat, flat, attr).impl_info_str());
  }));
}

std::vector<LayoutProbe> probe_layout(const dnnl::engine& engine, memory::data_type type,
                                      const ActivationLayout& layout) {
  std::vector<LayoutProbe> probes;
  add_conv_probes(engine, type, layout, probes);
  add_batch_norm_probes(engine, type, layout, probes);
  add_pool_probes(engine, type, layout, probes);
  add_eltwise_probes(engine, type, probes);
  return probes;
}

ActivationLayout layout_of(tag layout) {
  ActivationLayout result;
  result.blocked = layout;
  for (const KnownLayout& known : kKnownLayouts)
    if (known.layout == layout) result.block = known.block;
  return result;
}

std::string failures(const std::vector<LayoutProbe>& probes) {
  std::vector<std::string> lines;
  for (const LayoutProbe& p : probes)
    if (!p.optimized) lines.push_back(fmt::format("{}: {}", p.op, p.implementation));
  return fmt::format("{}", fmt::join(lines, "; "));
}

}  // namespace

bool is_reference_implementation(std::string_view implementation) {
  const std::vector<std::string> tokens = name_tokens(implementation);
  for (const std::string& token : tokens)
    if (token == "ref" || token.ends_with("ref") || token.starts_with("ref")) return true;
  // "simple:any" and the like: generic C++ loops; JIT kernels name their ISA ("jit:avx2").
  return tokens.size() == 2 && tokens[1] == "any" && tokens[0] != "jit";
}

std::string tag_name(tag layout) {
  switch (layout) {
    case tag::nChw16c:
      return "nChw16c";
    case tag::nChw8c:
      return "nChw8c";
    case tag::nChw4c:
      return "nChw4c";
    case tag::nhwc:
      return "nhwc";
    case tag::nchw:
      return "nchw";
    default:
      return fmt::format("format tag {}", static_cast<int>(layout));
  }
}

tag ActivationLayout::for_channels(memory::dim channels) const {
  if (block == 0) return blocked;
  return channels % block == 0 ? blocked : tag::nchw;
}

std::vector<tag> fallback_layouts(tag shared) {
  std::vector<tag> layouts = {shared};
  for (tag t : {tag::nhwc, tag::nchw})
    if (t != shared) layouts.push_back(t);
  return layouts;
}

ActivationLayout choose_activation_layout(const dnnl::engine& engine, memory::data_type type) {
  // The question oneDNN answers: a forward-training 3x3 convolution of ResNet's second stage
  // with every layout left to it.
  const dims src_dims = {16, 64, 56, 56}, weight_dims = {64, 64, 3, 3};
  tag asked = tag::undef;
  std::string asked_name;
  try {
    const auto pd = api::conv_forward(
        engine, dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
        memory::desc(src_dims, type, tag::any), memory::desc(weight_dims, type, tag::any), {},
        memory::desc(src_dims, type, tag::any), {1, 1}, {1, 1}, {1, 1}, base_attr());
    for (const KnownLayout& known : kKnownLayouts)
      if (pd.src_desc() == memory::desc(src_dims, type, known.layout)) asked = known.layout;
    asked_name = asked == tag::undef ? "a layout trainbench does not exchange" : tag_name(asked);
  } catch (const dnnl::error& e) {
    ActivationLayout none = layout_of(tag::nchw);
    none.usable = false;
    none.reason = fmt::format("oneDNN has no convolution for this dtype: {}", e.what());
    return none;
  }
  std::vector<std::string> notes;
  ActivationLayout best;
  std::size_t best_failures = ~std::size_t{0};
  for (tag candidate : fallback_layouts(asked == tag::undef ? tag::nhwc : asked)) {
    ActivationLayout layout = layout_of(candidate);
    layout.probes = probe_layout(engine, type, layout);
    const std::size_t failed =
        static_cast<std::size_t>(std::count_if(layout.probes.begin(), layout.probes.end(),
                                               [](const LayoutProbe& p) { return !p.optimized; }));
    if (failed == 0) {
      layout.reason = fmt::format(
          "oneDNN's forward convolution asked for {}; {}every probed op has an optimized kernel "
          "in {}",
          asked_name, notes.empty() ? "" : fmt::format("{}; ", fmt::join(notes, "; ")),
          tag_name(candidate));
      return layout;
    }
    notes.push_back(fmt::format("in {}: {}", tag_name(candidate), failures(layout.probes)));
    if (failed < best_failures) {
      best_failures = failed;
      best = layout;
    }
  }
  best.reason = fmt::format(
      "oneDNN's forward convolution asked for {}; no layout gave every probed op an optimized "
      "kernel ({}); chose {}, the fewest reference kernels",
      asked_name, fmt::join(notes, "; "), tag_name(best.blocked));
  return best;
}

}  // namespace tb::onednn
