// Pieces the model tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/registry.h"

namespace tb::testing_support {

// The backend, or null when it is not in this build or not usable here.
inline std::unique_ptr<Backend> make_backend(const char* name) {
  const BackendEntry* entry = find_backend(name);
  if (!entry || !entry->probe().usable) return nullptr;
  std::unique_ptr<Backend> backend;
  EXPECT_TRUE(entry->create(BackendConfig{}, &backend).ok());
  return backend;
}

// Relative L2 distance of `got` from `want`.
inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace tb::testing_support
