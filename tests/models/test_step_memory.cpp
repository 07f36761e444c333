// StepMemory's guarantees (models/step_memory.h), on real host memory: owned slots are disjoint
// and at aligned offsets, host slots land in the host block, aliases and views resolve to their
// memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "backends/registry.h"
#include "models/step_memory.h"

namespace tb {
namespace {

TEST(StepMemory, OwnedSlotsAreDisjointAlignedAndAliasesShareTheirRoot) {
  const std::unique_ptr<Backend> backend = make_reference_backend();
  StepMemory memory(*backend);
  const int small = memory.new_slot(100), large = memory.new_slot(5000);
  const int grown = memory.new_slot();  // sized later, as an op binds it
  memory[grown].bytes = 8192;
  const int unused = memory.new_slot();  // never bound: takes no memory
  const int host = memory.host_slot(12);
  const int alias = memory.alias_slot(memory.alias_slot(large));
  const int view = memory.view_slot(grown, 256, 512);
  ASSERT_TRUE(memory.allocate().ok());

  EXPECT_EQ(memory.root(alias), large);
  EXPECT_EQ(memory.buffer(alias).data, memory.buffer(large).data);
  EXPECT_EQ(static_cast<char*>(memory.buffer(view).data),
            static_cast<char*>(memory.buffer(grown).data) + 256);
  EXPECT_EQ(memory.buffer(view).bytes, 512u);
  EXPECT_EQ(memory[unused].buffer.bytes, 0u);
  EXPECT_EQ(memory.buffer(host).kind, MemoryKind::host_pageable);
  EXPECT_GE(memory.arena_bytes(), 100u + 5000u + 8192u);
  // Offsets within the arena: the arena itself is aligned as the backend allocates it.
  EXPECT_EQ(memory[small].offset % 64, 0u);
  EXPECT_EQ(memory[large].offset % 4096, 0u);
  EXPECT_EQ(memory[grown].offset % 4096, 0u);
  // Each owned slot filled with its own byte keeps it: no two overlap.
  const int owned[] = {small, large, grown, host};
  for (int k = 0; k < 4; ++k)
    std::memset(memory.buffer(owned[k]).data, k + 1, memory[owned[k]].bytes);
  for (int k = 0; k < 4; ++k) {
    const auto* bytes = static_cast<const unsigned char*>(memory.buffer(owned[k]).data);
    for (std::size_t i = 0; i < memory[owned[k]].bytes; ++i)
      ASSERT_EQ(bytes[i], k + 1) << "slot " << owned[k] << " byte " << i;
  }
}

TEST(StepMemory, LayOutSizesTheArenaWithoutAllocating) {
  const std::unique_ptr<Backend> backend = make_reference_backend();
  StepMemory memory(*backend);
  memory.new_slot(100);       // [0, 100)
  memory.new_slot(4096);      // [4096, 8192): a page or more starts on a page
  memory.new_slot(10);        // [8192, 8202)
  memory.host_slot(1 << 20);  // the host block, not the arena
  EXPECT_EQ(memory.lay_out(false), 8202u);
  EXPECT_EQ(memory.lay_out(true), std::size_t{1} << 20);
  EXPECT_EQ(memory.arena_bytes(), 0u);
}

}  // namespace
}  // namespace tb
