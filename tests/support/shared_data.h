// Test data from ../shared (a real trained model, tokenizer vocabularies and their vectors). A test
// that needs a file from there skips without it on a developer's machine, but fails naming the
// file where WEFT_REQUIRE_SHARED is set: scripts/test.sh sets it, since CI has ../shared and a check
// skipped there would pass for one that ran.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#define WEFT_NEED_SHARED_FILE(path)                                                             \
  do {                                                                                          \
    if (!std::filesystem::exists(path)) {                                                       \
      if (std::getenv("WEFT_REQUIRE_SHARED"))                                                   \
        FAIL() << "missing test data " << (path) << " (../shared; WEFT_REQUIRE_SHARED is set)"; \
      else                                                                                      \
        GTEST_SKIP() << "no " << (path) << " (../shared)";                                      \
    }                                                                                           \
  } while (0)
