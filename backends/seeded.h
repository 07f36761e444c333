// Counter-based seeded values: the same value for the same (seed, index) wherever they are
// generated, so data can be made where it is needed (and a dropout mask regenerated) instead
// of stored.
#pragma once

#include <cstdint>

namespace tb {

// splitmix64's finalizer: a well-mixed 64-bit value from a counter, for seeded data that is
// generated where it is needed instead of being stored.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

}  // namespace tb
