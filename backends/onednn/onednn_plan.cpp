#include "backends/onednn/onednn_plan.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "backends/onednn/onednn_api.h"
#include "backends/operands.h"

namespace tb::onednn {
namespace {

constexpr std::size_t kStagingAlignment = 4096;

std::size_t align_up(std::size_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

}  // namespace

memory::data_type to_dnnl(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::f16:
      return memory::data_type::f16;
    case DType::i32:
      return memory::data_type::s32;
    default:
      return memory::data_type::undef;
  }
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

tag activation_tag(Layout layout, memory::dim channels, const ActivationLayout& shared) {
  return layout == Layout::native ? shared.for_channels(channels) : tag::nchw;
}

OneDnnPlan::OneDnnPlan(const dnnl::engine& engine, dnnl::stream& stream, dnnl::primitive primitive,
                       const dnnl::primitive_desc_base& pd, std::vector<Operand> operands,
                       Epilogue epilogue)
    : engine_(engine),
      stream_(stream),
      primitive_(std::move(primitive)),
      descs_(std::move(operands)),
      epilogue_(std::move(epilogue)) {
  const memory::desc scratchpad = pd.scratchpad_desc();
  std::size_t workspace = align_up(scratchpad.get_size());
  scratchpad_ = memory(scratchpad, engine_, static_cast<void*>(DNNL_MEMORY_NONE));
  if (scratchpad.get_size() > 0) args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
  for (std::size_t i = 0; i < descs_.size(); ++i) {
    Operand& operand = descs_[i];
    operand.spec.bytes = operand.planned.get_size();
    operands_.push_back(operand.spec);
    memory caller(operand.planned, engine_, static_cast<void*>(DNNL_MEMORY_NONE));
    const bool staged = !operand.primitive.is_zero() && operand.primitive != operand.planned;
    is_staged_.push_back(staged);
    if (staged) {
      memory inside(operand.primitive, engine_, static_cast<void*>(DNNL_MEMORY_NONE));
      Staging staging{
          i, workspace, caller, inside,
          operand.spec.is_output ? dnnl::reorder(inside, caller) : dnnl::reorder(caller, inside)};
      (operand.spec.is_output ? staged_outputs_ : staged_inputs_).push_back(staging);
      workspace += align_up(operand.primitive.get_size());
      memories_.push_back(inside);
    } else {
      memories_.push_back(caller);
    }
    if (operand.arg != kNoArgument) args_[operand.arg] = memories_.back();
  }
  workspace_bytes_ = workspace;
  implementation_ = pd.impl_info_str();
  is_reference_ = is_reference_implementation(implementation_);
  const bool all_f32 = std::all_of(descs_.begin(), descs_.end(), [](const Operand& o) {
    return api::data_type_of(o.planned) != memory::data_type::bf16 &&
           api::data_type_of(o.planned) != memory::data_type::f16;
  });
  math_mode_ = all_f32 ? "strict" : "strict (low-precision inputs, fp32 accumulation)";
  const bool any_bf16 = std::any_of(descs_.begin(), descs_.end(), [](const Operand& o) {
    return api::data_type_of(o.planned) == memory::data_type::bf16;
  });
  emulates_bf16_ = any_bf16 && api::bf16_support().path != api::LowPrecisionPath::native;
}

void OneDnnPlan::bind_scalar(int arg, float value) {
  memory scalar({{1}, memory::data_type::f32, tag::x}, engine_);  // owns its buffer
  *static_cast<float*>(scalar.get_data_handle()) = value;
  args_[arg] = scalar;
}

Status OneDnnPlan::run(std::span<const Buffer> operands, Buffer workspace) try {
  char* base = static_cast<char*>(workspace.data);
  if (scratchpad_.get_desc().get_size() > 0 && scratchpad_.get_data_handle() != workspace.data)
    scratchpad_.set_data_handle(workspace.data);
  for (std::size_t i = 0; i < operands.size(); ++i)
    if (!is_staged_[i] && memories_[i].get_data_handle() != operands[i].data)
      memories_[i].set_data_handle(operands[i].data);
  for (std::vector<Staging>* list : {&staged_inputs_, &staged_outputs_})
    for (Staging& staging : *list) {
      if (staging.caller.get_data_handle() != operands[staging.operand].data)
        staging.caller.set_data_handle(operands[staging.operand].data);
      if (staging.staged.get_data_handle() != base + staging.offset)
        staging.staged.set_data_handle(base + staging.offset);  // the primitive's argument too
    }
  for (Staging& staging : staged_inputs_)
    staging.reorder.execute(stream_, staging.caller, staging.staged);
  primitive_.execute(stream_, args_);
  for (Staging& staging : staged_outputs_)
    staging.reorder.execute(stream_, staging.staged, staging.caller);
  stream_.wait();
  if (epilogue_) epilogue_(BoundOperands(operands_, operands));
  return Status::Ok();
} catch (const dnnl::error& e) {
  return Status::LibraryFailed(fmt::format("oneDNN {}: {}", implementation_, e.what()));
}

Status OneDnnPlan::import_operand(int index, const void* plain_host, Buffer device) const {
  return convert(descs_.at(index).plain, const_cast<void*>(plain_host), descs_.at(index).planned,
                 device.data);
}

Status OneDnnPlan::export_operand(int index, Buffer device, void* plain_host) const {
  return convert(descs_.at(index).planned, device.data, descs_.at(index).plain, plain_host);
}

Status OneDnnPlan::gather_operand(int index, Buffer device, std::span<const std::int64_t> positions,
                                  void* values) const {
  const Operand& operand = descs_.at(index);
  if (operand.planned == operand.plain)  // held as export_operand gives it
    return CpuPlan::gather_operand(index, device, positions, values);
  const std::size_t size = dtype_size(operand.spec.dtype);
  std::vector<std::int64_t> offsets;
  if (api::blocked_offsets(operand.planned, operand.plain, positions, &offsets)) {
    const auto elements = static_cast<std::int64_t>(operand.spec.elements());
    const auto held = static_cast<std::int64_t>(operand.planned.get_size() / size);
    for (std::size_t i = 0; i < positions.size(); ++i) {
      if (positions[i] < 0 || positions[i] >= elements || offsets[i] < 0 || offsets[i] >= held)
        return Status::InvalidArgument(
            fmt::format("position {} is outside operand {}", positions[i], operand.spec.name));
      std::memcpy(static_cast<char*>(values) + i * size,
                  static_cast<const char*>(device.data) + offsets[i] * size, size);
    }
    return Status::Ok();
  }
  std::vector<char> plain(operand.spec.elements() * size);
  TB_RETURN_IF_ERROR(export_operand(index, device, plain.data()));
  return gather_plain(plain.data(), operand.spec, positions, values);
}

Status OneDnnPlan::convert(const memory::desc& from_desc, void* from, const memory::desc& to_desc,
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

}  // namespace tb::onednn
