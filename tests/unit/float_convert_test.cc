// float32 <-> bfloat16 / float16 conversions: round to nearest even, NaN,
// Inf, subnormals.
#include "float_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace neuroncc::rt {
namespace {

float F(uint32_t bits) { return BitsFloat(bits); }

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(F(0x3f808000)), 0x3f80);  // tie, even below: down
  EXPECT_EQ(FloatToBf16(F(0x3f818000)), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(FloatToBf16(F(0x3f808001)), 0x3f81);  // just above the tie: up
  EXPECT_EQ(FloatToBf16(F(0x3f807fff)), 0x3f80);  // just below the tie: down
  EXPECT_EQ(FloatToBf16(-1.0f), 0xbf80);
  EXPECT_EQ(FloatToBf16(F(0xbf818000)), 0xbf82);
}

TEST(Bf16, SpecialValues) {
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to Inf
  EXPECT_EQ(FloatToBf16(F(0x7f7f7fff)), 0x7f7f);                       // largest that stays finite
  // Signalling NaN with only low payload bits must stay NaN, not become Inf.
  uint16_t snan = FloatToBf16(F(0x7f800001));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(snan)));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(F(0xffc00000)))));
  EXPECT_TRUE(std::signbit(Bf16ToFloat(FloatToBf16(F(0xffc00000)))));
  // Subnormals round on the same integer grid.
  EXPECT_EQ(FloatToBf16(F(0x00000001)), 0x0000);
  EXPECT_EQ(FloatToBf16(F(0x00008000)), 0x0000);  // tie to even (0)
  EXPECT_EQ(FloatToBf16(F(0x00018000)), 0x0002);  // tie to even (2)
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

TEST(Bf16, WideningIsExactAndRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = Bf16ToFloat(uint16_t(h));
    EXPECT_EQ(FloatBits(f), h << 16);
    if (!std::isnan(f)) EXPECT_EQ(FloatToBf16(f), h);
  }
}

TEST(F16, KnownValues) {
  EXPECT_EQ(FloatToF16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToF16(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToF16(65520.0f), 0x7c00);  // the tie above max rounds to Inf
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -25)), 0x0000);          // tie to even: 0
  EXPECT_EQ(FloatToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToF16(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 ulp: tie to even 2
  EXPECT_EQ(FloatToF16(std::ldexp(1023.5f, -24)), 0x0400);       // carries into the first normal
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);   // tie, even below
  EXPECT_EQ(FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToF16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(F(0x7f800001)))));
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(F16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToFloat(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToF16(f), h) << std::hex << h;
  }
}

#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))
// The compiler's own _Float16 conversions (IEEE round to nearest even) as an
// oracle, over every half and a sweep of float32 bit patterns.
TEST(F16, MatchesTheCompilersFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = uint16_t(h);
    _Float16 v;
    std::memcpy(&v, &bits, 2);
    float want = float(v);
    float got = F16ToFloat(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(FloatBits(got), FloatBits(want)) << std::hex << h;
    }
  }
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4093) {
    float f = F(uint32_t(u));
    _Float16 v = _Float16(f);
    uint16_t want;
    std::memcpy(&want, &v, 2);
    uint16_t got = FloatToF16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToFloat(got)));
    } else {
      ASSERT_EQ(got, want) << std::hex << u;
    }
  }
}
#endif

}  // namespace
}  // namespace neuroncc::rt
