#include "models/step_memory.h"

#include <algorithm>

namespace tb {
namespace {

constexpr std::size_t kLargeAlignment = 4096, kSmallAlignment = 64;

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

StepMemory::~StepMemory() {
  for (Buffer buffer : {arena_, host_block_})
    if (buffer.data) backend_.release(buffer);
}

int StepMemory::new_slot(std::size_t bytes) {
  slots_.push_back({bytes});
  return static_cast<int>(slots_.size()) - 1;
}

int StepMemory::host_slot(std::size_t bytes) {
  const int slot = new_slot(bytes);
  slots_[slot].host = true;
  return slot;
}

int StepMemory::alias_slot(int of) {
  Slot slot;
  slot.alias = of;
  slots_.push_back(slot);
  return static_cast<int>(slots_.size()) - 1;
}

int StepMemory::view_slot(int base, std::size_t offset, std::size_t bytes) {
  Slot slot;
  slot.base = base;
  slot.base_offset = offset;
  slot.bytes = bytes;
  slots_.push_back(slot);
  return static_cast<int>(slots_.size()) - 1;
}

int StepMemory::root(int slot) const {
  while (slots_[slot].alias >= 0) slot = slots_[slot].alias;
  return slot;
}

std::size_t StepMemory::lay_out(bool host) {
  std::size_t total = 0;
  for (Slot& slot : slots_) {
    if (slot.alias >= 0 || slot.base >= 0 || slot.bytes == 0 || slot.host != host) continue;
    const std::size_t alignment = slot.bytes >= kLargeAlignment ? kLargeAlignment : kSmallAlignment;
    slot.offset = align_up(total, alignment);
    total = slot.offset + slot.bytes;
  }
  return total;
}

Status StepMemory::allocate() {
  TB_RETURN_IF_ERROR(backend_.allocate(std::max<std::size_t>(lay_out(false), 1), &arena_));
  // What the host writes before each step (optimizer settings, the dropout step) lives in
  // host memory.
  if (const std::size_t host_bytes = lay_out(true); host_bytes > 0)
    TB_RETURN_IF_ERROR(backend_.allocate_host(host_bytes, /*pinned=*/false, &host_block_));
  for (Slot& slot : slots_) {
    const Buffer& block = slot.host ? host_block_ : arena_;
    if (slot.alias < 0 && slot.base < 0)
      slot.buffer = {static_cast<char*>(block.data) + slot.offset, slot.bytes, block.kind};
  }
  for (Slot& slot : slots_)
    if (slot.base >= 0) {
      const Buffer& base = slots_[root(slot.base)].buffer;
      slot.buffer = {static_cast<char*>(base.data) + slot.base_offset, slot.bytes, base.kind};
    }
  return Status::Ok();
}

}  // namespace tb
