// The chat session's token bookkeeping on a generated model whose vocabulary holds the
// template's control tokens, and rendered templates tokenized with real vocabularies
// (special tokens parsed to their ids, as llama.cpp's chat tokenizes them).
#include "chat/chat_session.h"

#include "support/expect_error.h"
#include "support/shared_data.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace weft::chat {
namespace {

// A tiny generated model (bytes kept alive: gguf::File reads them in place) with `family`'s
// template and control tokens.
struct ChatModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  Template tmpl{Family::ChatML};

  explicit ChatModel(Family family) : tmpl(family) {
    tools::GenModelOptions o;
    o.chat_template = std::string(tmpl.name());
    for (std::string_view m : tmpl.markers()) o.control_tokens.emplace_back(m);
    bytes = tools::generate_model_bytes(o);
    file = gguf::File::parse(bytes.data(), bytes.size());
    tok = tokenizer::Tokenizer::from_gguf(*file);
  }
  Token id(const std::string& special) const {
    const std::vector<Token> ids = tok->encode(special, false, true);
    EXPECT_EQ(ids.size(), 1u) << special;
    return ids.empty() ? -1 : ids[0];
  }
  std::vector<Token> encode(const std::string& text, bool first) const { return tok->encode(text, first, true); }
};

std::vector<Token> tail(const std::vector<Token>& v, int32_t from) { return {v.begin() + from, v.end()}; }

TEST(ChatSession, GeneratedModelCarriesTheTemplateAndParsesItsTokens) {
  const ChatModel m(Family::ChatML);
  EXPECT_EQ(Template::from_gguf(*m.file).family(), Family::ChatML);
  EXPECT_FALSE(Template::from_gguf(*m.file).fell_back());
  const Token start = m.id("<|im_start|>"), end = m.id("<|im_end|>");
  EXPECT_EQ(start, 318);  // the last ids of the 320-token vocabulary
  EXPECT_EQ(end, 319);
  EXPECT_TRUE(m.tok->is_eog(end));  // <|im_end|> ends a reply, as in llama.cpp
  const std::vector<Token> ids = m.encode("<|im_start|>user\nHi<|im_end|>", false);
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(ids.back(), end);
  // Without parse_special the same text is plain bytes and pieces.
  const std::vector<Token> plain = m.tok->encode("<|im_start|>user\nHi<|im_end|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start), 0);
  EXPECT_EQ(m.tok->piece(end, true), "<|im_end|>");
}

TEST(ChatSession, EachTurnFeedsOnlyWhatLlamaCppsChatWouldFeed) {
  const ChatModel m(Family::ChatML);
  Session s(m.tmpl, *m.tok);
  EXPECT_EQ(s.add({"system", "Be brief."}, false), 0);
  const size_t system_tokens = s.tokens().size();
  EXPECT_EQ(s.add({"user", "hello"}), static_cast<int32_t>(system_tokens));  // the system message stays
  const std::vector<Message> first = {{"system", "Be brief."}, {"user", "hello"}};
  EXPECT_EQ(s.tokens(), m.encode(m.tmpl.render(first, true), true));
  EXPECT_EQ(s.tokens().front(), 1);  // BOS

  // The model answers " world" and ends its turn with <|im_end|>.
  for (Token t : m.encode("world", false)) s.add_generated(t);
  s.add_generated(m.id("<|im_end|>"));
  EXPECT_EQ(s.reply(), " world");
  s.end_reply();
  EXPECT_EQ(s.messages().back().content, " world");

  const size_t before = s.tokens().size();
  const Message next{"user", "more"};
  const std::vector<Message> past(s.messages().begin(), s.messages().end());
  EXPECT_EQ(s.add(next), static_cast<int32_t>(before));  // everything cached stays
  // What is fed is llama.cpp's common_chat_format_single text, "\n" after <|im_end|> included.
  EXPECT_EQ(tail(s.tokens(), before), m.encode(render_suffix(m.tmpl, past, next, true), false));
  EXPECT_EQ(render_suffix(m.tmpl, past, next, true), "\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatSession, AReplyCutShortIsClosedBeforeTheNextTurn) {
  const ChatModel m(Family::ChatML);
  Session s(m.tmpl, *m.tok);
  s.add({"user", "hello"});
  for (Token t : m.encode("world", false)) s.add_generated(t);  // Ctrl-C: no <|im_end|>
  s.end_reply();
  const size_t before = s.tokens().size();
  EXPECT_EQ(s.add({"user", "more"}), static_cast<int32_t>(before));
  EXPECT_EQ(s.tokens()[before], m.id("<|im_end|>"));  // the turn is closed in the cache
}

TEST(ChatSession, ATemplateThatTrimsTheReplyRollsTheCacheBackToTheReply) {
  // llama3 trims messages: "  world" as generated is "world" when rendered again, so the cache
  // is cut where the reply starts and the reply is fed as the template writes it.
  const ChatModel m(Family::Llama3);
  Session s(m.tmpl, *m.tok);
  s.add({"user", "hello"});
  const size_t prompt = s.tokens().size();
  const std::vector<Token> spaced = m.encode(" world", false);  // "▁▁world": a token the trimmed text lacks
  for (Token t : spaced) s.add_generated(t);
  s.add_generated(m.id("<|eot_id|>"));
  s.end_reply();
  EXPECT_EQ(s.messages().back().content, "  world");
  EXPECT_EQ(s.add({"user", "more"}), static_cast<int32_t>(prompt));
  const std::string rest =
      "world<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nmore<|eot_id|><|start_header_id|>assistant<|end_"
      "header_id|>\n\n";
  EXPECT_EQ(tail(s.tokens(), prompt), m.encode(rest, false));
}

TEST(ChatSession, TokensTheRenderingGivesBackStayCached) {
  // " world" trimmed is "world", which SentencePiece encodes with its space again: the same
  // tokens, so nothing of the reply is fed twice.
  const ChatModel m(Family::Llama3);
  Session s(m.tmpl, *m.tok);
  s.add({"user", "hello"});
  for (Token t : m.encode("world", false)) s.add_generated(t);
  s.add_generated(m.id("<|eot_id|>"));
  s.end_reply();
  const size_t cached = s.tokens().size();
  EXPECT_EQ(s.add({"user", "more"}), static_cast<int32_t>(cached));
}

TEST(ChatSession, ClearKeepsTheSystemMessageAndUndoTakesBackOne) {
  const ChatModel m(Family::ChatML);
  Session s(m.tmpl, *m.tok);
  s.add({"system", "Be brief."}, false);
  s.add({"user", "hello"});
  s.end_reply();
  s.clear();
  ASSERT_EQ(s.messages().size(), 1u);
  EXPECT_EQ(s.messages()[0].role, "system");
  s.add({"user", "again"});
  EXPECT_EQ(s.tokens(), m.encode(m.tmpl.render(s.messages(), true), true));
  s.undo();
  EXPECT_EQ(s.messages().size(), 1u);
  s.undo();
  EXPECT_ERROR(s.undo(), "no message to take back");
}

// Rendered templates on real vocabularies: their special tokens come out as single ids.
TEST(ChatSession, RealVocabulariesParseTheTemplatesSpecialTokens) {
  const std::string dir = std::string(WEFT_SHARED_DIR) + "/models/vocab/";
  WEFT_NEED_SHARED_FILE(dir + "ggml-vocab-llama-spm.gguf");
  WEFT_NEED_SHARED_FILE(dir + "ggml-vocab-deepseek-coder.gguf");
  const std::vector<Message> chat = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}, {"assistant", "Bye"}};
  auto count = [](const std::vector<Token>& ids, Token t) { return std::count(ids.begin(), ids.end(), t); };

  auto spm_file = gguf::File::open(dir + "ggml-vocab-llama-spm.gguf");
  auto spm = tokenizer::Tokenizer::from_gguf(*spm_file);
  const std::vector<Token> llama2 = spm->encode(Template(Family::Llama2Sys).render(chat, true), true, true);
  EXPECT_EQ(llama2.front(), 1);    // <s>
  EXPECT_EQ(count(llama2, 2), 2);  // </s> after each reply
  const std::vector<Token> unparsed = spm->encode(Template(Family::Llama2Sys).render(chat, true), true, false);
  EXPECT_EQ(count(unparsed, 2), 0);  // written out as text

  auto ds_file = gguf::File::open(dir + "ggml-vocab-deepseek-coder.gguf");
  auto ds = tokenizer::Tokenizer::from_gguf(*ds_file);
  const std::vector<Token> eot = ds->encode("<|EOT|>", false, true);
  ASSERT_EQ(eot.size(), 1u);
  EXPECT_EQ(ds->piece(eot[0], true), "<|EOT|>");
  const std::vector<Token> deepseek = ds->encode(Template(Family::Deepseek).render(chat, true), false, true);
  EXPECT_EQ(count(deepseek, eot[0]), 2);
}

}  // namespace
}  // namespace weft::chat
