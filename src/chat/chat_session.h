// A conversation and the token sequence a model's KV cache holds for it. Each turn renders the
// whole conversation with the template and feeds only the text that differs from what the
// cache already holds, as llama.cpp's chat loop does (common_chat_format_single): the cache
// keeps the previous turns, including the reply's own tokens and its end-of-turn token. When
// the rendering disagrees with the cache (a template that trims the reply, a reply cut short by
// Ctrl-C or -n), the cache is rolled back to the last token both agree on and re-fed from there.
#pragma once

#include "chat/chat_template.h"
#include "core/token.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::chat {

class Session {
 public:
  Session(Template tmpl, const tokenizer::Tokenizer& tok) : tmpl_(tmpl), tok_(tok) {}

  // Appends a message (system or user) and brings tokens() up to the rendering of the whole
  // conversation, ending with the assistant's opening when add_generation_prompt. Returns how
  // many leading tokens of the previous tokens() are still valid: a cache holding more must be
  // truncated to this many before the rest of tokens() is fed.
  int32_t add(Message message, bool add_generation_prompt = true);
  // A token the model drew for the current reply: it belongs in the cache after tokens().
  void add_generated(Token t);
  // The reply is over; its text (special tokens left out) becomes the assistant's message.
  void end_reply();
  // Takes back the last message (one that did not fit the context, say).
  void undo();
  // Forgets every message but the leading system ones; the next add() reuses what it can.
  void clear();

  const std::vector<Token>& tokens() const { return tokens_; }
  const std::vector<Message>& messages() const { return messages_; }
  const std::string& reply() const { return reply_; }  // the current reply's text so far
  const Template& tmpl() const { return tmpl_; }

 private:
  // A point where the text and the tokens are known to line up: a fed chunk's or a generated
  // token's end.
  struct Mark {
    size_t text_end;
    size_t n_tokens;
  };

  Template tmpl_;
  const tokenizer::Tokenizer& tok_;
  std::vector<Message> messages_;
  std::vector<Token> tokens_;  // what the cache holds (or will, once fed)
  std::string text_;           // the text of tokens_: rendered chunks and generated pieces
  std::vector<Mark> marks_{{0, 0}};
  std::string reply_;
};

}  // namespace weft::chat
