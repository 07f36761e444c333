#include "backends/onednn/onednn_api.h"

namespace tb::onednn::api {

// Each function: the 3.x way, then the 2.x way (an operation descriptor, then the primitive
// descriptor).

dnnl::convolution_forward::primitive_desc conv_forward(const engine& engine, prop_kind prop,
                                                       algorithm alg, const md& src,
                                                       const md& weights, const md& bias,
                                                       const md& dst, const dims& strides,
                                                       const dims& pad_left, const dims& pad_right,
                                                       const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias.is_zero())
    return {engine, prop, alg, src, weights, dst, strides, pad_left, pad_right, attr};
  return {engine, prop, alg, src, weights, bias, dst, strides, pad_left, pad_right, attr};
#else
  using desc = dnnl::convolution_forward::desc;
  return {bias.is_zero() ? desc(prop, alg, src, weights, dst, strides, pad_left, pad_right)
                         : desc(prop, alg, src, weights, bias, dst, strides, pad_left, pad_right),
          attr, engine};
#endif
}

dnnl::convolution_backward_data::primitive_desc conv_backward_data(
    const engine& engine, algorithm alg, const md& diff_src, const md& weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, diff_src, weights, diff_dst, strides, pad_left, pad_right, hint, attr};
#else
  return {dnnl::convolution_backward_data::desc(alg, diff_src, weights, diff_dst, strides, pad_left,
                                                pad_right),
          attr, engine, hint};
#endif
}

dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const engine& engine, algorithm alg, const md& src, const md& diff_weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, src, diff_weights, diff_dst, strides, pad_left, pad_right, hint, attr};
#else
  return {dnnl::convolution_backward_weights::desc(alg, src, diff_weights, diff_dst, strides,
                                                   pad_left, pad_right),
          attr, engine, hint};
#endif
}

dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, data, data, epsilon, flags, attr};
#else
  return {dnnl::batch_normalization_forward::desc(prop, data, epsilon, flags), attr, engine};
#endif
}

dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const engine& engine, const md& data, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::batch_normalization_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop_kind::backward, data, data, data, epsilon, flags, hint, attr};
#else
  return {dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, epsilon, flags),
          attr, engine, hint};
#endif
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     const md& stats, float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, data, data, stats, epsilon, flags, attr};
#else
  return {dnnl::layer_normalization_forward::desc(prop, data, stats, epsilon, flags), attr, engine};
#endif
}

dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const engine& engine, const md& data, const md& stats, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::layer_normalization_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop_kind::backward, data, data, data, stats, epsilon, flags, hint, attr};
#else
  return {dnnl::layer_normalization_backward::desc(prop_kind::backward, data, data, stats, epsilon,
                                                   flags),
          attr, engine, hint};
#endif
}

dnnl::pooling_forward::primitive_desc pooling_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& src, const md& dst,
                                                      const dims& strides, const dims& kernel,
                                                      const dims& pad_left, const dims& pad_right,
                                                      const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  const dims no_dilation(strides.size(), 0);
  return {engine, prop, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, attr};
#else
  return {dnnl::pooling_forward::desc(prop, alg, src, dst, strides, kernel, pad_left, pad_right),
          attr, engine};
#endif
}

dnnl::pooling_backward::primitive_desc pooling_backward(
    const engine& engine, algorithm alg, const md& src, const md& dst, const dims& strides,
    const dims& kernel, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::pooling_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  const dims no_dilation(strides.size(), 0);
  return {engine, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, hint, attr};
#else
  return {dnnl::pooling_backward::desc(alg, src, dst, strides, kernel, pad_left, pad_right), attr,
          engine, hint};
#endif
}

dnnl::eltwise_forward::primitive_desc eltwise_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& data,
                                                      const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, prop, alg, data, data, 0.f, 0.f, attr};
#else
  return {dnnl::eltwise_forward::desc(prop, alg, data, 0.f, 0.f), attr, engine};
#endif
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const engine& engine, algorithm alg, const md& data, const primitive_attr& attr,
    const dnnl::eltwise_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, data, data, data, 0.f, 0.f, hint, attr};
#else
  return {dnnl::eltwise_backward::desc(alg, data, data, 0.f, 0.f), attr, engine, hint};
#endif
}

dnnl::binary::primitive_desc binary(const engine& engine, algorithm alg, const md& src0,
                                    const md& src1, const md& dst, const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, src0, src1, dst, attr};
#else
  return {dnnl::binary::desc(alg, src0, src1, dst), attr, engine};
#endif
}

dnnl::inner_product_forward::primitive_desc inner_product_forward(const engine& engine,
                                                                  prop_kind prop, const md& src,
                                                                  const md& weights, const md& bias,
                                                                  const md& dst,
                                                                  const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias.is_zero()) return {engine, prop, src, weights, dst, attr};
  return {engine, prop, src, weights, bias, dst, attr};
#else
  using desc = dnnl::inner_product_forward::desc;
  return {bias.is_zero() ? desc(prop, src, weights, dst) : desc(prop, src, weights, bias, dst),
          attr, engine};
#endif
}

dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data(
    const engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const primitive_attr& attr, const dnnl::inner_product_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, diff_src, weights, diff_dst, hint, attr};
#else
  return {dnnl::inner_product_backward_data::desc(diff_src, weights, diff_dst), attr, engine, hint};
#endif
}

dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights(
    const engine& engine, const md& src, const md& diff_weights, const md& diff_bias,
    const md& diff_dst, const primitive_attr& attr,
    const dnnl::inner_product_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  if (diff_bias.is_zero()) return {engine, src, diff_weights, diff_dst, hint, attr};
  return {engine, src, diff_weights, diff_bias, diff_dst, hint, attr};
#else
  using desc = dnnl::inner_product_backward_weights::desc;
  return {diff_bias.is_zero() ? desc(src, diff_weights, diff_dst)
                              : desc(src, diff_weights, diff_bias, diff_dst),
          attr, engine, hint};
#endif
}

dnnl::matmul::primitive_desc matmul(const engine& engine, const md& src, const md& weights,
                                    const md& dst, const primitive_attr& attr) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, src, weights, dst, attr};
#else
  return {dnnl::matmul::desc(src, weights, dst), attr, engine};
#endif
}

int batch_norm_backward_shift_arg() {
#if DNNL_VERSION_MAJOR >= 3
  return -1;
#else
  return DNNL_ARG_SHIFT;
#endif
}

dims dims_of(const md& desc) {
#if DNNL_VERSION_MAJOR >= 3
  return desc.get_dims();
#else
  return desc.dims();
#endif
}

dnnl::memory::data_type data_type_of(const md& desc) {
#if DNNL_VERSION_MAJOR >= 3
  return desc.get_data_type();
#else
  return desc.data_type();
#endif
}

void append_relu(dnnl::post_ops& post_ops) {
#if DNNL_VERSION_MAJOR >= 3
  post_ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
#else
  post_ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.f, 0.f);
#endif
}

int set_product_scale(primitive_attr& attr, float alpha) {
#if DNNL_VERSION_MAJOR >= 3
  if (alpha == 1.0f) return 0;
  attr.set_scales_mask(DNNL_ARG_WEIGHTS, 0);
  return DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS;
#else
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  return 0;
#endif
}

}  // namespace tb::onednn::api
