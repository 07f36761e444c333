// Buffers for the baselines with the memory treatment trainbench gives its own (2 MiB-aligned,
// transparent huge pages requested), so a comparison measures the harness, not the pages.
#pragma once

#include <sys/mman.h>

#include <cstdlib>
#include <memory>

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

template <typename T>
std::unique_ptr<T[], FreeDeleter> huge_buffer(std::size_t count) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t bytes = (count * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, bytes);
  if (!data) std::abort();
  madvise(data, bytes, MADV_HUGEPAGE);
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(data));
}
