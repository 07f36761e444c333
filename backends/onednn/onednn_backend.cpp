#include "backends/onednn/onednn_backend.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/onednn/onednn_api.h"
#include "backends/onednn/onednn_plan.h"
#include "backends/operands.h"
#include "backends/overloaded.h"

namespace tb {
namespace {

using dnnl::memory;
using onednn::base_attr;
using onednn::OneDnnPlan;
using onednn::to_dnnl;
using tag = dnnl::memory::format_tag;

std::string version_string() {
  const dnnl_version_t* v = dnnl_version();
  const std::string_view hash = v->hash;
  return fmt::format("{}.{}.{}{}", v->major, v->minor, v->patch,
                     hash.empty() || hash == "N/A" ? "" : fmt::format(" ({})", hash));
}

class OneDnnBackend final : public cpu::CpuBackend {
 public:
  explicit OneDnnBackend(const BackendConfig& config)
      : CpuBackend("cpu-onednn", config, /*onednn_isa_cap=*/true),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {
    for (DType dtype : {DType::f32, DType::bf16})
      layouts_.emplace(dtype, onednn::choose_activation_layout(engine_, to_dnnl(dtype)));
  }

  DeviceInfo device_info() const override {
    DeviceInfo info = CpuBackend::device_info();
    info.libraries.push_back({"oneDNN", version_string()});
    const dnnl_version_t* v = dnnl_version();
    info.details["onednn_cpu_runtime"] = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other";
    info.details["onednn_max_cpu_isa"] = onednn::api::isa_name(dnnl::get_effective_cpu_isa());
    const char* fpmath = std::getenv("ONEDNN_DEFAULT_FPMATH_MODE");
    info.details["onednn_default_fpmath_mode_env"] = fpmath ? fpmath : "";
    info.details["onednn_fpmath_mode_used"] = "strict (set on every primitive)";
    info.details["onednn_bf16"] = onednn::api::bf16_support().text;
    info.details["onednn_f16"] = onednn::api::f16_support().text;
    if (const std::string fault = onednn::api::known_fault(v->major, v->minor, cpu::host_cpuid);
        !fault.empty())
      info.details["known_fault"] = fault;
    nlohmann::json layouts = nlohmann::json::object();
    for (const auto& [dtype, layout] : layouts_) {
      nlohmann::json probes = nlohmann::json::array();
      for (const onednn::LayoutProbe& p : layout.probes)
        probes.push_back({{"op", p.op}, {"implementation", p.implementation}});
      layouts[std::string(dtype_name(dtype))] = {
          {"layout", layout.usable ? onednn::tag_name(layout.blocked) : "none"},
          {"reason", layout.reason},
          {"probes", probes}};
    }
    info.details["onednn_activation_layout"] = layouts;
    return info;
  }

  Status plan(const OpDesc& op, std::unique_ptr<Plan>* out) override {
    try {
      // oneDNN has no f64 path: f64 ops are the shared double-precision reference.
      if (data_type(op) == DType::f64) return CpuBackend::plan(op, out);
      return std::visit(
          Overloaded{[&](const GemmOp& gemm) { return plan_gemm(gemm, out); },
                     [&](const onednn::LayerOp auto& layer) { return plan_layer(layer, out); },
                     [&](const auto&) { return CpuBackend::plan(op, out); }},
          op);
    } catch (const dnnl::error& e) {
      return e.status == dnnl_unimplemented
                 ? Status::Unimplemented(fmt::format("oneDNN has no implementation: {}", e.what()))
                 : Status::LibraryFailed(fmt::format("oneDNN: {}", e.what()));
    }
  }

 private:
  static Status check_dtype(DType dtype) {
    if (to_dnnl(dtype) == memory::data_type::undef)
      return Status::Unimplemented(fmt::format("cpu-onednn has no {} path", dtype_name(dtype)))
          .because(ReasonCode::dtype_unsupported);
    if (dtype == DType::bf16 || dtype == DType::f16) {
      const onednn::api::LowPrecisionSupport support =
          dtype == DType::bf16 ? onednn::api::bf16_support() : onednn::api::f16_support();
      if (support.path == onednn::api::LowPrecisionPath::unavailable)
        return Status::Unimplemented(support.text.substr(support.text.find(": ") + 2))
            .because(ReasonCode::isa_lacking);
    }
    return Status::Ok();
  }

  // A network layer in the activation layout of its dtype (f32's for a dtype without one).
  Status plan_layer(const onednn::LayerOp auto& op, std::unique_ptr<Plan>* out) {
    TB_RETURN_IF_ERROR(check_dtype(op.dtype));
    const auto layout = layouts_.find(op.dtype);
    return onednn::LayerPlanner(engine_, stream_,
                                layout != layouts_.end() ? layout->second : layouts_.at(DType::f32),
                                out)
        .plan(op);
  }
  Status plan_gemm(const GemmOp& op, std::unique_ptr<Plan>* out) {
    for (DType dtype : {op.a_type, op.b_type, op.c_type}) TB_RETURN_IF_ERROR(check_dtype(dtype));
    if (op.prepacked_b && (op.heads != 1 || op.b_interleaved))
      return Status::Unimplemented("cpu-onednn: pre-packed B is for plain, single-head GEMMs");
    // Batch and heads as the outer dimensions; transposes and interleaved heads as strides.
    auto desc = [&](GemmOperand which, memory::dim rows, memory::dim cols, DType type) {
      const GemmOperandLayout l = gemm_layout(op, which);
      return memory::desc({op.batch, op.heads, rows, cols}, to_dnnl(type),
                          memory::dims{l.batch, l.head, l.row, l.col});
    };
    const memory::desc a = desc(GemmOperand::a, op.m, op.k, op.a_type),
                       b_plain = desc(GemmOperand::b, op.k, op.n, op.b_type),
                       c = desc(GemmOperand::c, op.m, op.n, op.c_type);
    const memory::desc b_planned =
        op.prepacked_b ? memory::desc(onednn::api::dims_of(b_plain), to_dnnl(op.b_type), tag::any)
                       : b_plain;

    dnnl::primitive_attr attr = base_attr();
    const int alpha_arg = onednn::api::set_product_scale(attr, op.alpha);
    if (op.beta != 0.0f) {
      dnnl::post_ops post_ops;
      post_ops.append_sum(op.beta);  // C = alpha * A B + beta * C: C is read, then written
      attr.set_post_ops(post_ops);
    }
    const auto pd = onednn::api::matmul(engine_, a, b_planned, c, attr);
    const std::vector<OperandSpec> specs = gemm_operands(op);
    std::vector<OneDnnPlan::Operand> operands =
        onednn::bind_operands(specs, {{"a", DNNL_ARG_SRC, a, a},
                                      {"b", DNNL_ARG_WEIGHTS, b_plain, pd.weights_desc()},
                                      {"c", DNNL_ARG_DST, c, c}});
    auto plan =
        std::make_unique<OneDnnPlan>(engine_, stream_, dnnl::matmul(pd), pd, std::move(operands));
    if (alpha_arg != 0) plan->bind_scalar(alpha_arg, op.alpha);
    *out = std::move(plan);
    return Status::Ok();
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<DType, onednn::ActivationLayout> layouts_;  // the native layout per dtype
};

}  // namespace

BackendEntry onednn_backend_entry() {
  return {"cpu-onednn",
          "CPU through oneDNN " + version_string() +
              " (matmul, convolution, batch and layer norm, pooling, eltwise)",
          [] {
            return Availability{true, ""};
          },
          [](const BackendConfig& config, std::unique_ptr<Backend>* out) {
            *out = std::make_unique<OneDnnBackend>(config);
            return Status::Ok();
          }};
}

}  // namespace tb
