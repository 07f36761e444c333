#include "backends/onednn/onednn_api.h"

namespace tb::onednn::api {

#if DNNL_VERSION_MAJOR >= 3

dnnl::convolution_forward::primitive_desc conv_forward(const engine& engine, prop_kind prop,
                                                       algorithm alg, const md& src,
                                                       const md& weights, const md& bias,
                                                       const md& dst, const dims& strides,
                                                       const dims& pad_left, const dims& pad_right,
                                                       const primitive_attr& attr) {
  if (bias.is_zero())
    return {engine, prop, alg, src, weights, dst, strides, pad_left, pad_right, attr};
  return {engine, prop, alg, src, weights, bias, dst, strides, pad_left, pad_right, attr};
}

dnnl::convolution_backward_data::primitive_desc conv_backward_data(
    const engine& engine, algorithm alg, const md& diff_src, const md& weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine, alg, diff_src, weights, diff_dst, strides, pad_left, pad_right, hint, attr};
}

dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const engine& engine, algorithm alg, const md& src, const md& diff_weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return {engine, alg, src, diff_weights, diff_dst, strides, pad_left, pad_right, hint, attr};
}

dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
  return {engine, prop, data, data, epsilon, flags, attr};
}

dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const engine& engine, const md& data, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::batch_normalization_forward::primitive_desc& hint) {
  return {engine, prop_kind::backward, data, data, data, epsilon, flags, hint, attr};
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     const md& stats, float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
  return {engine, prop, data, data, stats, epsilon, flags, attr};
}

dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const engine& engine, const md& data, const md& stats, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::layer_normalization_forward::primitive_desc& hint) {
  return {engine, prop_kind::backward, data, data, data, stats, epsilon, flags, hint, attr};
}

dnnl::pooling_forward::primitive_desc pooling_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& src, const md& dst,
                                                      const dims& strides, const dims& kernel,
                                                      const dims& pad_left, const dims& pad_right,
                                                      const primitive_attr& attr) {
  const dims no_dilation(strides.size(), 0);
  return {engine, prop, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, attr};
}

dnnl::pooling_backward::primitive_desc pooling_backward(
    const engine& engine, algorithm alg, const md& src, const md& dst, const dims& strides,
    const dims& kernel, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::pooling_forward::primitive_desc& hint) {
  const dims no_dilation(strides.size(), 0);
  return {engine, alg, src, dst, strides, kernel, no_dilation, pad_left, pad_right, hint, attr};
}

dnnl::eltwise_forward::primitive_desc eltwise_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& data,
                                                      const primitive_attr& attr) {
  return {engine, prop, alg, data, data, 0.f, 0.f, attr};
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const engine& engine, algorithm alg, const md& data, const primitive_attr& attr,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return {engine, alg, data, data, data, 0.f, 0.f, hint, attr};
}

dnnl::binary::primitive_desc binary(const engine& engine, algorithm alg, const md& src0,
                                    const md& src1, const md& dst, const primitive_attr& attr) {
  return {engine, alg, src0, src1, dst, attr};
}

dnnl::inner_product_forward::primitive_desc inner_product_forward(const engine& engine,
                                                                  prop_kind prop, const md& src,
                                                                  const md& weights, const md& bias,
                                                                  const md& dst,
                                                                  const primitive_attr& attr) {
  if (bias.is_zero()) return {engine, prop, src, weights, dst, attr};
  return {engine, prop, src, weights, bias, dst, attr};
}

dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data(
    const engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const primitive_attr& attr, const dnnl::inner_product_forward::primitive_desc& hint) {
  return {engine, diff_src, weights, diff_dst, hint, attr};
}

dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights(
    const engine& engine, const md& src, const md& diff_weights, const md& diff_bias,
    const md& diff_dst, const primitive_attr& attr,
    const dnnl::inner_product_forward::primitive_desc& hint) {
  if (diff_bias.is_zero()) return {engine, src, diff_weights, diff_dst, hint, attr};
  return {engine, src, diff_weights, diff_bias, diff_dst, hint, attr};
}

dnnl::matmul::primitive_desc matmul(const engine& engine, const md& src, const md& weights,
                                    const md& dst, const primitive_attr& attr) {
  return {engine, src, weights, dst, attr};
}

dims dims_of(const md& desc) {
  return desc.get_dims();
}

dnnl::memory::data_type data_type_of(const md& desc) {
  return desc.get_data_type();
}

void append_relu(dnnl::post_ops& post_ops) {
  post_ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
}

int set_product_scale(primitive_attr& attr, float alpha) {
  if (alpha == 1.0f) return 0;
  attr.set_scales_mask(DNNL_ARG_WEIGHTS, 0);
  return DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS;
}

#else  // oneDNN 2.x: an operation descriptor, then the primitive descriptor

dnnl::convolution_forward::primitive_desc conv_forward(const engine& engine, prop_kind prop,
                                                       algorithm alg, const md& src,
                                                       const md& weights, const md& bias,
                                                       const md& dst, const dims& strides,
                                                       const dims& pad_left, const dims& pad_right,
                                                       const primitive_attr& attr) {
  using desc = dnnl::convolution_forward::desc;
  return {bias.is_zero() ? desc(prop, alg, src, weights, dst, strides, pad_left, pad_right)
                         : desc(prop, alg, src, weights, bias, dst, strides, pad_left, pad_right),
          attr, engine};
}

dnnl::convolution_backward_data::primitive_desc conv_backward_data(
    const engine& engine, algorithm alg, const md& diff_src, const md& weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return {dnnl::convolution_backward_data::desc(alg, diff_src, weights, diff_dst, strides, pad_left,
                                                pad_right),
          attr, engine, hint};
}

dnnl::convolution_backward_weights::primitive_desc conv_backward_weights(
    const engine& engine, algorithm alg, const md& src, const md& diff_weights, const md& diff_dst,
    const dims& strides, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  return {dnnl::convolution_backward_weights::desc(alg, src, diff_weights, diff_dst, strides,
                                                   pad_left, pad_right),
          attr, engine, hint};
}

dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
  return {dnnl::batch_normalization_forward::desc(prop, data, epsilon, flags), attr, engine};
}

dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const engine& engine, const md& data, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::batch_normalization_forward::primitive_desc& hint) {
  return {dnnl::batch_normalization_backward::desc(prop_kind::backward, data, data, epsilon, flags),
          attr, engine, hint};
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_forward(const engine& engine,
                                                                     prop_kind prop, const md& data,
                                                                     const md& stats, float epsilon,
                                                                     normalization_flags flags,
                                                                     const primitive_attr& attr) {
  return {dnnl::layer_normalization_forward::desc(prop, data, stats, epsilon, flags), attr, engine};
}

dnnl::layer_normalization_backward::primitive_desc layer_norm_backward(
    const engine& engine, const md& data, const md& stats, float epsilon, normalization_flags flags,
    const primitive_attr& attr, const dnnl::layer_normalization_forward::primitive_desc& hint) {
  return {dnnl::layer_normalization_backward::desc(prop_kind::backward, data, data, stats, epsilon,
                                                   flags),
          attr, engine, hint};
}

dnnl::pooling_forward::primitive_desc pooling_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& src, const md& dst,
                                                      const dims& strides, const dims& kernel,
                                                      const dims& pad_left, const dims& pad_right,
                                                      const primitive_attr& attr) {
  return {dnnl::pooling_forward::desc(prop, alg, src, dst, strides, kernel, pad_left, pad_right),
          attr, engine};
}

dnnl::pooling_backward::primitive_desc pooling_backward(
    const engine& engine, algorithm alg, const md& src, const md& dst, const dims& strides,
    const dims& kernel, const dims& pad_left, const dims& pad_right, const primitive_attr& attr,
    const dnnl::pooling_forward::primitive_desc& hint) {
  return {dnnl::pooling_backward::desc(alg, src, dst, strides, kernel, pad_left, pad_right), attr,
          engine, hint};
}

dnnl::eltwise_forward::primitive_desc eltwise_forward(const engine& engine, prop_kind prop,
                                                      algorithm alg, const md& data,
                                                      const primitive_attr& attr) {
  return {dnnl::eltwise_forward::desc(prop, alg, data, 0.f, 0.f), attr, engine};
}

dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const engine& engine, algorithm alg, const md& data, const primitive_attr& attr,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  return {dnnl::eltwise_backward::desc(alg, data, data, 0.f, 0.f), attr, engine, hint};
}

dnnl::binary::primitive_desc binary(const engine& engine, algorithm alg, const md& src0,
                                    const md& src1, const md& dst, const primitive_attr& attr) {
  return {dnnl::binary::desc(alg, src0, src1, dst), attr, engine};
}

dnnl::inner_product_forward::primitive_desc inner_product_forward(const engine& engine,
                                                                  prop_kind prop, const md& src,
                                                                  const md& weights, const md& bias,
                                                                  const md& dst,
                                                                  const primitive_attr& attr) {
  using desc = dnnl::inner_product_forward::desc;
  return {bias.is_zero() ? desc(prop, src, weights, dst) : desc(prop, src, weights, bias, dst),
          attr, engine};
}

dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data(
    const engine& engine, const md& diff_src, const md& weights, const md& diff_dst,
    const primitive_attr& attr, const dnnl::inner_product_forward::primitive_desc& hint) {
  return {dnnl::inner_product_backward_data::desc(diff_src, weights, diff_dst), attr, engine, hint};
}

dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights(
    const engine& engine, const md& src, const md& diff_weights, const md& diff_bias,
    const md& diff_dst, const primitive_attr& attr,
    const dnnl::inner_product_forward::primitive_desc& hint) {
  using desc = dnnl::inner_product_backward_weights::desc;
  return {diff_bias.is_zero() ? desc(src, diff_weights, diff_dst)
                              : desc(src, diff_weights, diff_bias, diff_dst),
          attr, engine, hint};
}

dnnl::matmul::primitive_desc matmul(const engine& engine, const md& src, const md& weights,
                                    const md& dst, const primitive_attr& attr) {
  return {dnnl::matmul::desc(src, weights, dst), attr, engine};
}

dims dims_of(const md& desc) {
  return desc.dims();
}

dnnl::memory::data_type data_type_of(const md& desc) {
  return desc.data_type();
}

void append_relu(dnnl::post_ops& post_ops) {
  post_ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.f, 0.f);
}

int set_product_scale(primitive_attr& attr, float alpha) {
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  return 0;
}

#endif

}  // namespace tb::onednn::api
