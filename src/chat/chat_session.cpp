#include "chat/chat_session.h"

#include "core/error.h"

#include <algorithm>

namespace weft::chat {

int32_t Session::add(Message message, bool add_generation_prompt) {
  messages_.push_back(std::move(message));
  const std::string full = tmpl_.render(messages_, add_generation_prompt);
  const size_t agree = std::mismatch(text_.begin(), text_.end(), full.begin(), full.end()).first - text_.begin();
  // Keep everything up to the last point where text and tokens line up inside the agreement.
  while (marks_.back().text_end > agree) marks_.pop_back();
  const Mark keep = marks_.back();
  std::vector<Token> old = std::move(tokens_);
  tokens_.assign(old.begin(), old.begin() + static_cast<ptrdiff_t>(keep.n_tokens));
  // As llama.cpp's chat: BOS (add_special) only when starting from an empty cache; the rendered
  // special tokens (<|im_start|> ...) are parsed as such.
  const std::vector<Token> fresh = tok_.encode(full.substr(keep.text_end), keep.n_tokens == 0, true);
  tokens_.insert(tokens_.end(), fresh.begin(), fresh.end());
  text_ = full;
  marks_.push_back({text_.size(), tokens_.size()});
  reply_.clear();
  // Re-encoded text often gives back the tokens the cache already has (a reply the template
  // only trims of a space the tokenizer puts back): those stay.
  return static_cast<int32_t>(std::mismatch(old.begin(), old.end(), tokens_.begin(), tokens_.end()).first -
                              old.begin());
}

void Session::add_generated(Token t) {
  tokens_.push_back(t);
  text_ += tok_.piece(t, /*special=*/true);  // the cache holds the end-of-turn token too
  marks_.push_back({text_.size(), tokens_.size()});
  if (!tok_.is_eog(t)) reply_ += tok_.piece(t, false);
}

void Session::end_reply() {
  messages_.push_back({"assistant", reply_});
  reply_.clear();
}

void Session::undo() {
  if (messages_.empty()) fail("chat", "no message to take back");
  messages_.pop_back();
}

void Session::clear() {
  const auto first_other =
      std::find_if(messages_.begin(), messages_.end(), [](const Message& m) { return m.role != "system"; });
  messages_.erase(first_other, messages_.end());
  reply_.clear();
}

}  // namespace weft::chat
