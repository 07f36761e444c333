// Where every buffer of a training step lives (models/ only; tests/models checks what it
// guarantees). Buffers are planned as slots while the step is lowered, before any memory
// exists; allocate() then places them.
// Guarantees: every owned slot gets its own region of the arena (device) or of the host
// block, at least as large as the largest operand any op binds to it, at an offset that is a
// multiple of 4 KiB when it holds a page or more (of 64 bytes otherwise; the block itself is
// aligned as the backend allocates it), and overlapping no other owned slot: every
// slot lives the whole step (no reuse by lifetime), so any op may read any buffer at any
// point of the step. An alias is the same memory as its root; a view is a byte range of its
// base (a parameter in the flat parameter buffer).
#pragma once

#include <cstddef>
#include <vector>

#include "backends/backend.h"

namespace tb {

class StepMemory {
 public:
  struct Slot {
    std::size_t bytes = 0;
    int alias = -1;               // same memory as that slot
    int base = -1;                // a view into that slot ...
    std::size_t base_offset = 0;  // ... at this byte offset
    std::size_t offset = 0;       // in the arena (or the host block), for owned slots
    bool host = false;            // host memory: what the host writes every step
    Buffer buffer = {};           // set by allocate()
  };

  explicit StepMemory(Backend& backend) : backend_(backend) {}
  ~StepMemory();
  StepMemory(const StepMemory&) = delete;
  StepMemory& operator=(const StepMemory&) = delete;

  int new_slot(std::size_t bytes = 0);  // device memory; bytes grow as ops bind it
  int host_slot(std::size_t bytes);     // host memory, written by the host before a step
  int alias_slot(int of);
  int view_slot(int base, std::size_t offset, std::size_t bytes);
  int root(int slot) const;  // the slot that owns `slot`'s memory (itself unless an alias)

  Slot& operator[](int slot) { return slots_[static_cast<std::size_t>(slot)]; }
  const Slot& operator[](int slot) const { return slots_[static_cast<std::size_t>(slot)]; }
  // The memory of `slot` once allocated (its root's, for an alias).
  Buffer buffer(int slot) const { return (*this)[root(slot)].buffer; }

  // Assigns the owned slots' offsets in the arena (host: false) or the host block; returns
  // the block's size. What planned_bytes() reports, without allocating.
  std::size_t lay_out(bool host);
  // Lays out and allocates the arena and the host block, and sets every slot's buffer.
  Status allocate();
  std::size_t arena_bytes() const { return arena_.bytes; }

 private:
  Backend& backend_;
  std::vector<Slot> slots_;
  Buffer arena_, host_block_;
};

}  // namespace tb
