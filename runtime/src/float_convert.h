// Bit-exact conversions between float32 and the 16-bit storage formats.
// Narrowing rounds to nearest, ties to even, like the hardware and like
// PyTorch's .to(torch.bfloat16) / .to(torch.float16); NaN stays NaN (quiet),
// overflow becomes Inf, and float16 subnormals are produced and read exactly.
#pragma once

#include <cstdint>
#include <cstring>

namespace neuroncc::rt {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float Bf16ToFloat(uint16_t h) { return BitsFloat(uint32_t(h) << 16); }

// Float32 bits `u` rounded to bfloat16, whose bits are then the high half
// of *high (the low half is left over): adding 0x7fff plus the kept LSB
// rounds half to even, and a carry out of the mantissa correctly bumps the
// exponent (and the largest finite values to Inf); a NaN keeps its sign and
// top payload, made quiet. Selects rather than branches, so the same code
// serves uint32_t and GCC vectors of it (vector_math.cc, matmul_kernel.h).
// (By reference: a 32-byte vector passed by value has another ABI without
// AVX, which clang refuses in the baseline build.)
template <typename U>
inline void Bf16RoundedHigh(const U& u, U* high) {
  U rounded = u + 0x7fffu + ((u >> 16) & 1u);
  U quiet = u | 0x00400000u;
  *high = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}

// The bfloat16 bits (low half) of float32 bits `u`.
template <typename U>
inline void Bf16BitsOf(const U& u, U* bits) {
  Bf16RoundedHigh(u, bits);
  *bits >>= 16;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  Bf16BitsOf(FloatBits(f), &bits);
  return uint16_t(bits);
}

inline float F16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float32.
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t FloatToF16(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  // quiet NaN
  if (x >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // >= 2^16: Inf (incl. Inf itself)
  uint32_t e = x >> 23;
  if (e < 113) {
    // Result is a float16 subnormal (or zero): units of 2^-24.
    if (e < 101) return sign;  // below 2^-26: rounds to zero
    uint32_t m = (x & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..25
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal
    return uint16_t(sign | r);
  }
  uint32_t h = ((e - 112) << 10) | ((x & 0x7fffffu) >> 13);
  uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach Inf: correct
  return uint16_t(sign | h);
}

}  // namespace neuroncc::rt
