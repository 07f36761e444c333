// Buffers for the baselines with the memory treatment trainbench gives its own (aligned to the
// kernel's transparent huge page size, huge pages requested), so a comparison measures the
// harness, not the pages.
#pragma once

#include <sys/mman.h>

#include <cstdlib>
#include <fstream>
#include <memory>

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// The PMD huge page size the kernel reports (2 MiB on x86-64, larger with 16 or 64 KiB base
// pages on arm64); 2 MiB when it reports none.
inline std::size_t huge_page_bytes() {
  std::size_t bytes = 0;
  std::ifstream("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") >> bytes;
  return bytes > 0 ? bytes : std::size_t{2} << 20;
}

template <typename T>
std::unique_ptr<T[], FreeDeleter> huge_buffer(std::size_t count) {
  const std::size_t huge_page = huge_page_bytes();
  const std::size_t bytes = (count * sizeof(T) + huge_page - 1) / huge_page * huge_page;
  void* data = std::aligned_alloc(huge_page, bytes);
  if (!data) std::abort();
  madvise(data, bytes, MADV_HUGEPAGE);
  return std::unique_ptr<T[], FreeDeleter>(static_cast<T*>(data));
}
