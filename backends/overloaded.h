// Lambdas as one overload set, for std::visit over an OpDesc: a backend's plan() has one per op
// it plans itself and an `auto` one for the rest.
#pragma once

namespace tb {

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
// C++20 deduces this for an aggregate; clang before 17 needs the guide (the fuzzers' build).
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace tb
