// EXPECT_ERROR / ASSERT_ERROR (tests/support/expect_error.h) pass only on a weft::Error whose
// what() holds the expected text; anything else fails and shows what actually happened.
#include "support/expect_error.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace weft {
namespace {

void throws_gguf() { fail("gguf", "token id {} is outside the vocabulary", 7); }
void throws_other() { throw std::out_of_range("vector index"); }
void throws_int() { throw 42; }
void returns() {}

TEST(ExpectError, PassesOnTheRightMessage) {
  EXPECT_ERROR(throws_gguf(), "outside the vocabulary");
  EXPECT_ERROR(throws_gguf(), "[gguf] token id 7");
  ASSERT_ERROR(throws_gguf(), "");  // any weft::Error
}

TEST(ExpectError, StatementsAndLocalsWork) {
  int calls = 0;
  EXPECT_ERROR(
      {
        ++calls;
        throws_gguf();
      },
      "outside");
  EXPECT_EQ(calls, 1);
}

TEST(ExpectError, WrongMessageFailsAndShowsIt) {
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(throws_gguf(), "no such tensor"),
                          "threw weft::Error \"[gguf] token id 7 is outside the vocabulary\"");
}

TEST(ExpectError, OtherExceptionFails) {
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(throws_other(), "vector"),
                          "another exception (not weft::Error): \"vector index\"");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(throws_int(), "x"), "non-std exception");
}

TEST(ExpectError, NoExceptionFails) { EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(returns(), "anything"), "threw nothing"); }

TEST(ExpectError, AssertStopsTheTest) {
  EXPECT_FATAL_FAILURE(ASSERT_ERROR(returns(), "anything"), "returns() threw nothing");
  EXPECT_FATAL_FAILURE(ASSERT_ERROR(throws_gguf(), "nope"), "outside the vocabulary");
}

}  // namespace
}  // namespace weft
