#include "backends/onednn/onednn_backend.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"

namespace tb {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

memory::data_type to_dnnl(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::f16:
      return memory::data_type::f16;
    default:
      return memory::data_type::undef;
  }
}

std::string version_string() {
  const dnnl_version_t* v = dnnl_version();
  const std::string_view hash = v->hash;
  return fmt::format("{}.{}.{}{}", v->major, v->minor, v->patch,
                     hash.empty() || hash == "N/A" ? "" : fmt::format(" ({})", hash));
}

// fp32 means fp32: set strict math explicitly so ONEDNN_DEFAULT_FPMATH_MODE cannot turn
// fp32 primitives into bf16 ones. Scratchpads are ours, planned as the workspace.
dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A oneDNN primitive with, for each operand, its execution argument, the plan's memory
// descriptor and the plain one callers exchange data in.
class OneDnnPlan final : public cpu::CpuPlan {
 public:
  struct Operand {
    OperandSpec spec;
    int arg;
    memory::desc plain, planned;
  };

  OneDnnPlan(const dnnl::engine& engine, dnnl::stream& stream, dnnl::primitive primitive,
             const dnnl::primitive_desc_base& pd, std::vector<Operand> operands)
      : engine_(engine),
        stream_(stream),
        primitive_(std::move(primitive)),
        descs_(std::move(operands)) {
    for (Operand& operand : descs_) {
      operand.spec.bytes = operand.planned.get_size();
      operands_.push_back(operand.spec);
      memories_.emplace_back(operand.planned, engine_, static_cast<void*>(DNNL_MEMORY_NONE));
      args_[operand.arg] = memories_.back();
    }
    const memory::desc scratchpad = pd.scratchpad_desc();
    workspace_bytes_ = scratchpad.get_size();
    scratchpad_ = memory(scratchpad, engine_, static_cast<void*>(DNNL_MEMORY_NONE));
    if (workspace_bytes_ > 0) args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
    implementation_ = pd.impl_info_str();
    const bool all_f32 = std::all_of(descs_.begin(), descs_.end(), [](const Operand& o) {
      return o.planned.data_type() == memory::data_type::f32;
    });
    math_mode_ = all_f32 ? "strict" : "strict (low-precision inputs, fp32 accumulation)";
  }

  Status run(std::span<const Buffer> operands, Buffer workspace) override {
    for (std::size_t i = 0; i < operands.size(); ++i)
      if (memories_[i].get_data_handle() != operands[i].data)
        memories_[i].set_data_handle(operands[i].data);
    if (workspace_bytes_ > 0 && scratchpad_.get_data_handle() != workspace.data)
      scratchpad_.set_data_handle(workspace.data);
    primitive_.execute(stream_, args_);
    stream_.wait();
    return Status::Ok();
  }

  Status import_operand(int index, const void* plain_host, Buffer device) const override {
    return convert(descs_.at(index).plain, const_cast<void*>(plain_host), descs_.at(index).planned,
                   device.data);
  }
  Status export_operand(int index, Buffer device, void* plain_host) const override {
    return convert(descs_.at(index).planned, device.data, descs_.at(index).plain, plain_host);
  }

 private:
  Status convert(const memory::desc& from_desc, void* from, const memory::desc& to_desc,
                 void* to) const {
    if (from_desc == to_desc) {
      cpu::parallel_copy(to, from, from_desc.get_size());
      return Status::Ok();
    }
    memory source(from_desc, engine_, from), target(to_desc, engine_, to);
    dnnl::reorder(source, target).execute(stream_, source, target);
    stream_.wait();
    return Status::Ok();
  }

  dnnl::engine engine_;
  dnnl::stream& stream_;
  dnnl::primitive primitive_;
  std::vector<Operand> descs_;
  std::vector<memory> memories_;
  memory scratchpad_;
  std::unordered_map<int, memory> args_;
};

class OneDnnBackend final : public cpu::CpuBackend {
 public:
  explicit OneDnnBackend(const BackendConfig& config)
      : CpuBackend("cpu-onednn", config), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  DeviceInfo device_info() const override {
    DeviceInfo info = CpuBackend::device_info();
    info.libraries.push_back({"oneDNN", version_string()});
    const dnnl_version_t* v = dnnl_version();
    info.details["onednn_cpu_runtime"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other";
    info.details["onednn_max_cpu_isa"] = isa_name(dnnl::get_effective_cpu_isa());
    const char* fpmath = std::getenv("ONEDNN_DEFAULT_FPMATH_MODE");
    info.details["onednn_default_fpmath_mode_env"] = fpmath ? fpmath : "";
    info.details["onednn_fpmath_mode_used"] = "strict (set on every primitive)";
    return info;
  }

  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    try {
      if (const auto* gemm = std::get_if<GemmOp>(&op)) return plan_gemm(*gemm, out);
      if (const auto* conv = std::get_if<ConvOp>(&op)) return plan_conv(*conv, out);
    } catch (const dnnl::error& e) {
      return e.status == dnnl_unimplemented
                 ? Status::Unimplemented(fmt::format("oneDNN has no implementation: {}", e.what()))
                 : Status::Failed(fmt::format("oneDNN: {}", e.what()));
    }
    return CpuBackend::plan(op, out);
  }

 private:
  static std::string isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
      case dnnl::cpu_isa::avx2:
        return "avx2";
      case dnnl::cpu_isa::avx512_core:
        return "avx512_core";
      case dnnl::cpu_isa::avx512_core_vnni:
        return "avx512_core_vnni";
      case dnnl::cpu_isa::avx512_core_bf16:
        return "avx512_core_bf16";
      case dnnl::cpu_isa::avx512_core_amx:
        return "avx512_core_amx";
      default:
        return fmt::format("isa code {}", static_cast<int>(isa));
    }
  }

  Status check_dtype(DType dtype) const {
    if (to_dnnl(dtype) == memory::data_type::undef)
      return Status::Unimplemented(fmt::format("cpu-onednn has no {} path", dtype_name(dtype)));
    return Status::Ok();
  }

  Status plan_gemm(const GemmOp& op, std::unique_ptr<Plan>* out) {
    for (DType dtype : {op.a_type, op.b_type, op.c_type}) TB_RETURN_IF_ERROR(check_dtype(dtype));
    const memory::dim batch = op.batch, m = op.m, n = op.n, k = op.k;
    // Row-major, transposes expressed as strides; batch-major for strided-batched GEMM.
    const memory::desc a({batch, m, k}, to_dnnl(op.a_type),
                         op.trans_a ? memory::dims{m * k, 1, m} : memory::dims{m * k, k, 1});
    const memory::desc b_plain({batch, k, n}, to_dnnl(op.b_type),
                               op.trans_b ? memory::dims{k * n, 1, k} : memory::dims{k * n, n, 1});
    const memory::desc b_planned =
        op.prepacked_b ? memory::desc({batch, k, n}, to_dnnl(op.b_type), tag::any) : b_plain;
    const memory::desc c({batch, m, n}, to_dnnl(op.c_type), memory::dims{m * n, n, 1});

    dnnl::primitive_attr attr = base_attr();
    if (op.alpha != 1.0f) attr.set_output_scales(0, {op.alpha});
    if (op.beta != 0.0f) {
      dnnl::post_ops post_ops;
      post_ops.append_sum(op.beta);  // C = alpha * A B + beta * C: C is read, then written
      attr.set_post_ops(post_ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b_planned, c), attr, engine_);
    std::vector<OneDnnPlan::Operand> operands = {
        {{"a", op.a_type, {batch, m, k}, 0, false}, DNNL_ARG_SRC, a, a},
        {{"b", op.b_type, {batch, k, n}, 0, false}, DNNL_ARG_WEIGHTS, b_plain, pd.weights_desc()},
        {{"c", op.c_type, {batch, m, n}, 0, true}, DNNL_ARG_DST, c, c}};
    *out =
        std::make_unique<OneDnnPlan>(engine_, stream_, dnnl::matmul(pd), pd, std::move(operands));
    return Status::Ok();
  }

  Status plan_conv(const ConvOp& op, std::unique_ptr<Plan>* out) {
    TB_RETURN_IF_ERROR(check_dtype(op.dtype));
    const memory::dims src_dims = {op.mb, op.ic, op.ih, op.iw};
    const memory::dims weight_dims = {op.oc, op.ic, op.kh, op.kw};
    const memory::dims dst_dims = {op.mb, op.oc, op.oh(), op.ow()};
    const memory::dims strides = {op.sh, op.sw}, padding = {op.ph, op.pw};
    const memory::data_type dt = to_dnnl(op.dtype);
    // Weight gradients stay fp32 for low-precision training (fp32 master weights).
    const memory::data_type diff_weights_dt = memory::data_type::f32;
    // The plan picks blocked layouts (format any); callers exchange plain NCHW / OIHW.
    auto any = [](const memory::dims& dims, memory::data_type type) {
      return memory::desc(dims, type, tag::any);
    };
    const memory::desc src_plain(src_dims, dt, tag::nchw),
        weights_plain(weight_dims, dt, tag::oihw), dst_plain(dst_dims, dt, tag::nchw),
        diff_weights_plain(weight_dims, diff_weights_dt, tag::oihw);
    const auto algorithm = dnnl::algorithm::convolution_direct;
    const dnnl::primitive_attr attr = base_attr();
    dnnl::convolution_forward::primitive_desc forward(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm,
                                        any(src_dims, dt), any(weight_dims, dt), any(dst_dims, dt),
                                        strides, padding, padding),
        attr, engine_);
    using Operand = OneDnnPlan::Operand;
    const DType weights_grad_type = DType::f32;
    switch (op.direction) {
      case ConvDirection::forward: {
        std::vector<Operand> operands = {
            {{"src", op.dtype, src_dims, 0, false}, DNNL_ARG_SRC, src_plain, forward.src_desc()},
            {{"weights", op.dtype, weight_dims, 0, false},
             DNNL_ARG_WEIGHTS,
             weights_plain,
             forward.weights_desc()},
            {{"dst", op.dtype, dst_dims, 0, true}, DNNL_ARG_DST, dst_plain, forward.dst_desc()}};
        *out = std::make_unique<OneDnnPlan>(engine_, stream_, dnnl::convolution_forward(forward),
                                            forward, std::move(operands));
        return Status::Ok();
      }
      case ConvDirection::backward_data: {
        dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(algorithm, any(src_dims, dt),
                                                  any(weight_dims, dt), any(dst_dims, dt), strides,
                                                  padding, padding),
            attr, engine_, forward);
        std::vector<Operand> operands = {{{"diff_dst", op.dtype, dst_dims, 0, false},
                                          DNNL_ARG_DIFF_DST,
                                          dst_plain,
                                          pd.diff_dst_desc()},
                                         {{"weights", op.dtype, weight_dims, 0, false},
                                          DNNL_ARG_WEIGHTS,
                                          weights_plain,
                                          pd.weights_desc()},
                                         {{"diff_src", op.dtype, src_dims, 0, true},
                                          DNNL_ARG_DIFF_SRC,
                                          src_plain,
                                          pd.diff_src_desc()}};
        *out = std::make_unique<OneDnnPlan>(engine_, stream_, dnnl::convolution_backward_data(pd),
                                            pd, std::move(operands));
        return Status::Ok();
      }
      case ConvDirection::backward_weights: {
        dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(algorithm, any(src_dims, dt),
                                                     any(weight_dims, diff_weights_dt),
                                                     any(dst_dims, dt), strides, padding, padding),
            attr, engine_, forward);
        std::vector<Operand> operands = {
            {{"src", op.dtype, src_dims, 0, false}, DNNL_ARG_SRC, src_plain, pd.src_desc()},
            {{"diff_dst", op.dtype, dst_dims, 0, false},
             DNNL_ARG_DIFF_DST,
             dst_plain,
             pd.diff_dst_desc()},
            {{"diff_weights", weights_grad_type, weight_dims, 0, true},
             DNNL_ARG_DIFF_WEIGHTS,
             diff_weights_plain,
             pd.diff_weights_desc()}};
        *out = std::make_unique<OneDnnPlan>(
            engine_, stream_, dnnl::convolution_backward_weights(pd), pd, std::move(operands));
        return Status::Ok();
      }
    }
    return Status::InvalidArgument("unknown convolution direction");
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
};

}  // namespace

BackendEntry onednn_backend_entry() {
  return {"cpu-onednn", "CPU through oneDNN " + version_string() + " (matmul, convolution)",
          [] {
            return Availability{true, ""};
          },
          [](const BackendConfig& config, std::unique_ptr<Backend>* out) {
            *out = std::make_unique<OneDnnBackend>(config);
            return Status::Ok();
          }};
}

}  // namespace tb
