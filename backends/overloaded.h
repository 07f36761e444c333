// Lambdas as one overload set, for std::visit over an OpDesc: a backend's plan() has one per op
// it plans itself and an `auto` one for the rest.
#pragma once

namespace tb {

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};

}  // namespace tb
