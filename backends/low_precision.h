// Low-precision floats on the host: bfloat16 and IEEE half <-> float, and rounding a float to
// TF32, all round to nearest even (what the libraries and the hardware do).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/host_device.h"

namespace tb::cpu {

TB_ALWAYS_INLINE std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

TB_ALWAYS_INLINE float bf16_to_float(std::uint16_t value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

inline float round_to_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

// A bf16 value as the shared CPU kernels store it: arithmetic goes through float, so a kernel
// written for float or double instantiates for bf16 data unchanged.
struct Bf16 {
  std::uint16_t bits = 0;
  Bf16() = default;
  Bf16(float value) : bits(float_to_bf16(value)) {}  // NOLINT: converts like a float
  Bf16(double value) : Bf16(static_cast<float>(value)) {}
  Bf16(int value) : Bf16(static_cast<float>(value)) {}
  operator float() const { return bf16_to_float(bits); }  // NOLINT
  Bf16& operator+=(float value) { return *this = Bf16(float(*this) + value); }
};
static_assert(sizeof(Bf16) == 2);

// TF32: fp32's exponent with a 10-bit mantissa, stored in 32 bits.
inline float round_to_tf32(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

inline std::uint16_t float_to_f16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u)
    return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (magnitude < 0x38800000u) {  // subnormal or zero in half: scale by 2^24 and round
    float scaled;
    std::memcpy(&scaled, &magnitude, sizeof(scaled));
    return static_cast<std::uint16_t>(
        sign | static_cast<std::uint32_t>(std::nearbyint(scaled * 16777216.0f)));
  }
  const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float f16_to_float(std::uint16_t value) {
  const std::uint32_t sign = static_cast<std::uint32_t>(value & 0x8000u) << 16;
  const std::uint32_t exponent = (value >> 10) & 0x1fu, mantissa = value & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float magnitude = static_cast<float>(mantissa) / 16777216.0f;
    return sign ? -magnitude : magnitude;
  }
  const std::uint32_t bits = sign | (exponent == 31 ? 0x7f800000u | (mantissa << 13)
                                                    : ((exponent + 112) << 23) | (mantissa << 13));
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

inline float round_to_f16(float value) {
  return f16_to_float(float_to_f16(value));
}

// FP8 E4M3 (OCP's E4M3FN, what Hopper's Tensor Cores take): 4 exponent bits (bias 7), 3
// mantissa bits, no infinities, 448 the largest finite value (beyond it: saturated), one NaN.
inline std::uint8_t float_to_f8_e4m3(float value) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return 0x7f;
  if (magnitude < 0x1p-6f)  // subnormal: multiples of 2^-9 (8 rounds up to the least normal)
    return static_cast<std::uint8_t>(sign | static_cast<int>(std::nearbyint(magnitude * 512.0f)));
  int exponent = 0;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction 2^exponent
  int mantissa = static_cast<int>(std::nearbyint((2 * fraction - 1) * 8));
  exponent -= 1;  // magnitude = (1 + mantissa / 8) 2^exponent
  if (mantissa == 8) mantissa = 0, ++exponent;
  if (exponent > 8 || (exponent == 8 && mantissa == 7)) return sign | 0x7e;  // 448
  return static_cast<std::uint8_t>(sign | ((exponent + 7) << 3) | mantissa);
}

inline float f8_e4m3_to_float(std::uint8_t bits) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 15 && mantissa == 7)
    magnitude = NAN;
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  else
    magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return bits & 0x80 ? -magnitude : magnitude;
}

inline float round_to_f8_e4m3(float value) {
  return f8_e4m3_to_float(float_to_f8_e4m3(value));
}

}  // namespace tb::cpu
