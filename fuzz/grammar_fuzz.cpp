// libFuzzer entry point for GBNF grammars (model/grammar.h) and their automaton: the input is
// grammar text, then after a NUL byte the texts a sequence would write, NUL-separated. Parsing must
// succeed or throw weft::Error; each text is checked (accepts), taken when accepted (advance) or
// refused by advance with weft::Error, and the state's complete/finished asked. A crash, a sanitizer
// report, another exception type, an accepted text advance refuses, or a hang (libFuzzer's -timeout:
// the limits below bound the work) is a bug. A grammar comes from a request (`grammar`, a schema).
#include "core/error.h"
#include "model/grammar.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find('\0');
  const std::string_view text = in.substr(0, cut);
  std::string_view rest = cut == std::string_view::npos ? std::string_view() : in.substr(cut + 1);
  weft::model::GrammarLimits limits;
  limits.max_elements = 1 << 14;  // small enough that one input stays well under a second
  limits.max_stacks = 256;
  limits.max_stack_depth = 1 << 10;
  std::shared_ptr<const weft::model::Grammar> g;
  try {
    g = weft::model::Grammar::parse(text, "root", limits);
  } catch (const weft::Error&) {
    return 0;
  }
  try {
    weft::model::GrammarState state(g);
    while (!rest.empty()) {
      const size_t end = rest.find('\0');
      const std::string_view piece = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      weft::model::GrammarState copy = state;
      if (state.accepts(piece)) {
        try {
          state.advance(piece);  // the same step accepts ran: it must not throw
        } catch (const weft::Error&) {
          __builtin_trap();
        }
      } else {
        try {
          copy.advance(piece);
        } catch (const weft::Error&) {
          continue;
        }
        __builtin_trap();  // advance took what accepts refused
      }
      if (state.finished() && !state.complete()) __builtin_trap();
    }
    (void)weft::model::grammar_matches(g, text);
  } catch (const weft::Error&) {
    // too many parses alive at once (an ambiguous grammar): the documented refusal
  }
  return 0;
}
