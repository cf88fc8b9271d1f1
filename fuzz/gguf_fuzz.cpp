// libFuzzer entry point for the GGUF reader: any input must parse or throw weft::Error; anything
// else (a crash, a sanitizer report, another exception type) is a bug the fuzzer reports.
// Build: clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc fuzz/gguf_fuzz.cpp
//        src/gguf/gguf_reader.cpp src/core/dtype.cpp -lfmt
#include "core/error.h"
#include "gguf/gguf_reader.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = weft::gguf::File::parse(data, size, "fuzz");
    // Touch what a loader would: every tensor's byte range must lie inside the input.
    for (const auto& t : f->tensors()) {
      if (t.n_bytes > 0 && (t.data < data || t.data + t.n_bytes > data + size)) __builtin_trap();
    }
  } catch (const weft::Error&) {
  }
  return 0;
}
