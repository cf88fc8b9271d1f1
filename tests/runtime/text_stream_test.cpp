// TextStream sends only whole UTF-8 characters and never the beginning of a stop string that may
// still complete. Generated vocabularies hold the 256 byte tokens <0x00>..<0xFF> at ids 3..258,
// so any byte sequence can be pushed one byte at a time.
#include "runtime/text_stream.h"

#include "support/generated_model.h"

#include <gtest/gtest.h>

namespace weft::runtime {
namespace {

Token byte_token(unsigned char b) { return 3 + b; }

class TextStreamTest : public ::testing::Test {
 protected:
  // Pushes each byte of s; returns what became ready after each push, joined by '|'.
  std::string feed(TextStream& ts, std::string_view s, bool* stopped = nullptr) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i > 0) out += '|';
      const bool stop = ts.push(byte_token(static_cast<unsigned char>(s[i])));
      out += ts.take();
      if (stop) {
        if (stopped) *stopped = true;
        break;
      }
    }
    return out;
  }
  test_support::GeneratedModel m_;
};

TEST_F(TextStreamTest, ByteTokensDecodeToTheirBytes) {
  EXPECT_EQ(m_.tok->piece(byte_token('a')), "a");
  EXPECT_EQ(m_.tok->piece(byte_token(0xC3)), "\xC3");
}

TEST_F(TextStreamTest, MultiByteCharactersAreSentWhole) {
  TextStream ts(*m_.tok, {});
  // "é" (C3 A9) and "€" (E2 82 AC): nothing is sent while a character is incomplete.
  EXPECT_EQ(feed(ts, "a\xC3\xA9\xE2\x82\xAC"), "a||\xC3\xA9|||\xE2\x82\xAC");
}

TEST_F(TextStreamTest, UnfinishedCharacterAtTheEndIsFlushedAsItIs) {
  TextStream ts(*m_.tok, {});
  EXPECT_EQ(feed(ts, "x\xE2\x82"), "x||");
  EXPECT_EQ(ts.finish(), "\xE2\x82");
}

TEST_F(TextStreamTest, InvalidBytesAreNotHeldForever) {
  TextStream ts(*m_.tok, {});
  // A stray continuation byte and a lead byte followed by ASCII never become valid.
  EXPECT_EQ(feed(ts,
                 "\x80"
                 "a\xC3"
                 "b"),
            "\x80|a||\xC3"
            "b");
}

TEST_F(TextStreamTest, StopStringIsCutWithoutSendingItsBeginning) {
  TextStream ts(*m_.tok, {"END"});
  bool stopped = false;
  EXPECT_EQ(feed(ts, "abENxENDtail", &stopped), "a|b|||ENx|||");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(ts.finish(), "");  // "END" and what would follow are dropped
}

TEST_F(TextStreamTest, HeldBeginningOfAStopStringIsSentWhenGenerationEnds) {
  TextStream ts(*m_.tok, {"END"});
  EXPECT_EQ(feed(ts, "okEN"), "o|k||");
  EXPECT_EQ(ts.finish(), "EN");
}

TEST_F(TextStreamTest, EarliestOfSeveralStopStringsWins) {
  TextStream ts(*m_.tok, {"cd", "bcde", ""});  // an empty stop string never matches
  bool stopped = false;
  EXPECT_EQ(feed(ts, "abcde", &stopped), "a|||b");
  EXPECT_TRUE(stopped);
}

TEST_F(TextStreamTest, StopStringInsideOneTokenCutsThatToken) {
  Token multi = 259;  // the first piece of several bytes after the byte tokens
  while (m_.tok->piece(multi).size() < 2) ++multi;
  const std::string piece = m_.tok->piece(multi), stop = piece.substr(1);
  TextStream ts(*m_.tok, {stop});
  EXPECT_TRUE(ts.push(multi));
  EXPECT_EQ(ts.take(), piece.substr(0, piece.find(stop)));
}

TEST(Utf8Prefix, CompleteAndIncompleteEndings) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(complete_utf8_prefix("\x80\x80\x80"), 3u);
}

TEST(PartialStop, LongestSuffixThatBeginsTheStopString) {
  EXPECT_EQ(partial_stop_suffix("hello wor", "world"), 3u);
  EXPECT_EQ(partial_stop_suffix("hello", "world"), 0u);
  EXPECT_EQ(partial_stop_suffix("xworld", "world"), 0u);  // complete: found by the search, not held
  EXPECT_EQ(partial_stop_suffix("aa", "aab"), 2u);
}

}  // namespace
}  // namespace weft::runtime
