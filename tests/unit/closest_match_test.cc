// lib/util/closest_match: "did you mean" for mistyped subcommands and JSON fields.
#include <gtest/gtest.h>

#include "lib/util/closest_match.h"

namespace ftx {
namespace {

TEST(ClosestMatch, EditDistanceIsLevenshtein) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("genrate", "generate"), 1u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
}

TEST(ClosestMatch, PicksAPlausibleTypoOnly) {
  const std::vector<std::string> subs = {"convert-hf", "convert-nemo", "generate", "inspect", "tokenize"};
  EXPECT_EQ(closest_match("genrate", subs), "generate");
  EXPECT_EQ(closest_match("inspcet", subs), "inspect");
  EXPECT_EQ(closest_match("convert-hg", subs), "convert-hf");
  EXPECT_EQ(closest_match("frobnicate", subs), "");
  EXPECT_EQ(closest_match("max_new_token", {"max_new_tokens", "min_length"}), "max_new_tokens");
}

}  // namespace
}  // namespace ftx
