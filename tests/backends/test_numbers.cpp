// The one number parser: whole text, finite, in range; sizes multiplied without wrapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "backends/numbers.h"

namespace tb {
namespace {

TEST(Numbers, FiniteAndWithinTheirRange) {
  EXPECT_EQ(parse_number("0.25"), 0.25);
  EXPECT_EQ(parse_number("-1e3"), -1000);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "1e999", "", "1.5x", " 1", "0x10"})
    EXPECT_FALSE(parse_number(bad)) << bad;
  const NumberRange probability{.min = 0, .max = 1, .max_excluded = true};
  EXPECT_EQ(parse_number("0", probability), 0);
  EXPECT_FALSE(parse_number("1", probability));
  EXPECT_FALSE(parse_number("-0.1", probability));
  const NumberRange positive{.min = 0, .min_excluded = true};
  EXPECT_FALSE(parse_number("0", positive));
  EXPECT_EQ(probability.words(), "in [0, 1)");
  EXPECT_EQ(positive.words(), "> 0");
  EXPECT_EQ(NumberRange{}.words(), "");
}

TEST(Numbers, WholeNumbersWithSuffixesNeverWrap) {
  EXPECT_EQ(parse_whole_number("42"), 42);
  EXPECT_EQ(parse_whole_number("64Ki", 0, 1 << 20, true), 65536);
  EXPECT_EQ(parse_whole_number("3k", 0, 1 << 20, true), 3000);
  EXPECT_FALSE(parse_whole_number("64Ki"));  // suffixes only where asked for
  EXPECT_FALSE(parse_whole_number("9999999999Gi", 0, std::numeric_limits<std::int64_t>::max(),
                                  true));  // 2^30 x 9999999999 wraps
  EXPECT_FALSE(parse_whole_number("18446744073709551615"));
  EXPECT_FALSE(parse_whole_number("-1", 0));
  EXPECT_FALSE(parse_whole_number("1.5"));
  EXPECT_FALSE(parse_whole_number("7", 0, 6));
}

TEST(Numbers, ProductsAboveTwoToThe62AreRefused) {
  EXPECT_EQ(checked_product({3, 8, 1 << 20}), 3 * 8 * (1 << 20));
  EXPECT_EQ(checked_product({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
  EXPECT_FALSE(checked_product({std::int64_t{1} << 31, std::int64_t{1} << 31, 2}));
  EXPECT_FALSE(checked_product({std::int64_t{1} << 40, std::int64_t{1} << 40}));  // wraps to 0
  EXPECT_FALSE(checked_product({-1, 4}));
  EXPECT_EQ(checked_product({}), 1);
}

}  // namespace
}  // namespace tb
