// Counter-based seeded values: the same value for the same (seed, index) wherever they are
// generated, so data can be made where it is needed (and a dropout mask regenerated) instead
// of stored.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/host_device.h"

namespace tb {

// splitmix64's finalizer: a well-mixed 64-bit value from a counter, for seeded data that is
// generated where it is needed instead of being stored.
TB_HOST_DEVICE TB_ALWAYS_INLINE std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

// Dropout's keep decision for element i of execution `step`: a counter-based hash, so the
// backward pass regenerates the forward pass's mask instead of storing it, and every backend
// (CPU or GPU) drops the same elements. An element is kept when its hash reaches
// dropout_threshold(probability) = ceil(probability * 2^53).
TB_HOST_DEVICE TB_ALWAYS_INLINE std::uint64_t dropout_hash(std::uint64_t seed, std::int32_t step,
                                                           std::int64_t i) {
  return mix64(seed ^ mix64(static_cast<std::uint64_t>(step) * kGoldenGamma +
                            static_cast<std::uint64_t>(i))) >>
         11;
}
inline std::uint64_t dropout_threshold(double probability) {
  return static_cast<std::uint64_t>(std::ceil(probability * 0x1.0p53));
}

}  // namespace tb
