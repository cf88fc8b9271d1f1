// EXPECT_ERROR(stmt, "substring") / ASSERT_ERROR(stmt, "substring"): passes only when stmt throws
// weft::Error whose what() contains the substring. No exception, another exception type, or
// another message fails, printing what was actually thrown, so a test that expects one failure
// cannot pass on an unrelated one.
#pragma once

#include "core/error.h"

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <string_view>

namespace weft::test_support {

// Runs f and judges what it throws; the assertion result names stmt and the actual outcome. A
// predicate-formatter (EXPECT_PRED_FORMAT3), so a failure prints only that.
template <typename F>
::testing::AssertionResult throws_error(const char*, const char*, const char*, F&& f, const char* stmt,
                                        std::string_view substring) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(substring) != std::string_view::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << stmt << " threw weft::Error \"" << e.what()
                                         << "\", expected it to contain \"" << substring << "\"";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << stmt << " threw another exception (not weft::Error): \"" << e.what()
                                         << "\", expected weft::Error containing \"" << substring << "\"";
  } catch (...) {
    return ::testing::AssertionFailure() << stmt << " threw a non-std exception, expected weft::Error containing \""
                                         << substring << "\"";
  }
  return ::testing::AssertionFailure() << stmt << " threw nothing, expected weft::Error containing \"" << substring
                                       << "\"";
}

}  // namespace weft::test_support

#define EXPECT_ERROR(stmt, substring) \
  EXPECT_PRED_FORMAT3(                \
      ::weft::test_support::throws_error, [&] { stmt; }, #stmt, (substring))
#define ASSERT_ERROR(stmt, substring) \
  ASSERT_PRED_FORMAT3(                \
      ::weft::test_support::throws_error, [&] { stmt; }, #stmt, (substring))
