// Generated tokens -> text that is safe to send as it comes: whole UTF-8 characters only, and
// nothing that may yet turn out to be the start of a stop string. A server streams each token's
// text as soon as it can, so both must be held back until the next tokens decide them.
#pragma once

#include "core/token.h"
#include "tokenizer/tokenizer.h"

#include <string>
#include <string_view>
#include <vector>

namespace weft::runtime {

class TextStream {
 public:
  // `stop`: strings that end the generation; the text from the first one on is never emitted.
  TextStream(const tokenizer::Tokenizer& tok, std::vector<std::string> stop);

  // Adds a token's text. True when a stop string has now appeared: the text before it is ready,
  // the stop string and whatever followed it are dropped, and no further push is expected.
  bool push(Token t);
  // The text that became safe since the last call.
  std::string take();
  // The generation ended without a stop string: everything held back (an unfinished UTF-8
  // sequence included, as it is).
  std::string finish();

 private:
  void release();  // moves what can no longer change from held_ to ready_

  const tokenizer::Tokenizer& tok_;
  std::vector<std::string> stop_;
  std::string held_;   // decoded, not yet safe
  std::string ready_;  // safe, not yet taken
  bool stopped_ = false;
};

// Length of the longest prefix of s that does not end inside a UTF-8 sequence still to be
// completed (an invalid byte counts as complete: it will never become valid).
size_t complete_utf8_prefix(std::string_view s);

// Length of the longest suffix of s that is a proper prefix of `stop` (may still become it).
size_t partial_stop_suffix(std::string_view s, std::string_view stop);

}  // namespace weft::runtime
