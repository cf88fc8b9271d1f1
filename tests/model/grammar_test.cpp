// GBNF parsing (valid, malformed, hostile) and the automaton's acceptance of strings.
#include "model/grammar.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace weft::model {
namespace {

bool matches(std::string_view grammar, std::string_view text) { return grammar_matches(Grammar::parse(grammar), text); }

TEST(Grammar, LiteralsAlternativesSequences) {
  const char* g = R"(root ::= "yes" | "no" | "may" "be"  # a comment
)";
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "no"));
  EXPECT_TRUE(matches(g, "maybe"));
  EXPECT_FALSE(matches(g, "ye"));
  EXPECT_FALSE(matches(g, "yess"));
  EXPECT_FALSE(matches(g, "may"));
  EXPECT_FALSE(matches(g, ""));
}

TEST(Grammar, Repetitions) {
  EXPECT_TRUE(matches(R"(root ::= "a"*)", ""));
  EXPECT_TRUE(matches(R"(root ::= "a"*)", "aaaa"));
  EXPECT_FALSE(matches(R"(root ::= "a"+)", ""));
  EXPECT_TRUE(matches(R"(root ::= "a"+ "b")", "aab"));
  EXPECT_TRUE(matches(R"(root ::= "ab"? "c")", "abc"));
  EXPECT_TRUE(matches(R"(root ::= "ab"? "c")", "c"));
  EXPECT_FALSE(matches(R"(root ::= "ab"? "c")", "ac"));
  const char* g = R"(root ::= [0-9]{2,4})";
  EXPECT_FALSE(matches(g, "1"));
  EXPECT_TRUE(matches(g, "12"));
  EXPECT_TRUE(matches(g, "1234"));
  EXPECT_FALSE(matches(g, "12345"));
  EXPECT_TRUE(matches(R"(root ::= "x"{3})", "xxx"));
  EXPECT_FALSE(matches(R"(root ::= "x"{3})", "xx"));
  EXPECT_TRUE(matches(R"(root ::= ("ab"){2,})", "ababab"));
  EXPECT_FALSE(matches(R"(root ::= ("ab"){2,})", "ab"));
  EXPECT_TRUE(matches(R"(root ::= "ab"{0,1} "c")", "abc"));
}

TEST(Grammar, CharClassesAndEscapes) {
  const char* g = R"(root ::= [a-cx] [^0-9\]] . "\x41\u00e9\n\"\\" [\t])";
  EXPECT_TRUE(matches(g,
                      "b]"
                      "z"
                      "A\xc3\xa9\n\"\\\t") == false);  // ']' is excluded
  EXPECT_TRUE(matches(g,
                      "x!\xe2\x82\xac"
                      "A\xc3\xa9\n\"\\\t"));
  EXPECT_FALSE(matches(g, "d!zA\xc3\xa9\n\"\\\t"));
  EXPECT_FALSE(matches(g, "a5zA\xc3\xa9\n\"\\\t"));
  EXPECT_TRUE(matches(R"(root ::= [é-ü]+)", "\xc3\xa9\xc3\xbc"));
}

TEST(Grammar, RulesGroupsAndNewlinesInParentheses) {
  const char* g = R"(
# a list of numbers
root   ::= "[" ws (number ("," ws number)*)? "]"
number ::= "-"? [0-9]+
ws     ::= (
  " " | "\n"
)*
)";
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[ 1, -23,\n4]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[1 2]"));
}

TEST(Grammar, JsonGbnfFromLlamaCpp) {
  // grammars/json.gbnf of llama.cpp a135ec0ba.
  const char* g = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5, "x\n\u00e9"], "b": {"c": null}})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_FALSE(matches(g, "[1]"));  // root is an object
  EXPECT_FALSE(matches(g, R"({"a": })"));
  EXPECT_FALSE(matches(g, R"({"a": "unterminated})"));
}

TEST(Grammar, PrefixesAndCompletion) {
  auto g = Grammar::parse(R"(root ::= "ab" | "abcd")");
  GrammarState s(g);
  EXPECT_FALSE(s.complete());
  EXPECT_TRUE(s.accepts("a"));
  EXPECT_FALSE(s.accepts("b"));
  s.advance("ab");
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(s.finished());  // "cd" may still follow
  GrammarState copy = s;
  s.advance("cd");
  EXPECT_TRUE(s.finished());
  EXPECT_FALSE(s.accepts("x"));
  EXPECT_ERROR(s.advance("x"), "does not continue");
  EXPECT_TRUE(copy.accepts("c"));  // the copy kept its own state
}

TEST(Grammar, PartialUtf8AcrossTokens) {
  auto g = Grammar::parse(R"(root ::= "é" [α-ω])");  // é = c3 a9, α..ω = ce b1 .. cf 89
  GrammarState s(g);
  EXPECT_TRUE(s.accepts("\xc3"));
  EXPECT_FALSE(s.accepts("\xc4"));  // U+0100.. cannot be é
  s.advance("\xc3");
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.accepts("\xaa"));  // ê
  EXPECT_FALSE(s.accepts("a"));     // not a continuation byte
  s.advance("\xa9\xce");
  EXPECT_TRUE(s.accepts("\xb1"));
  EXPECT_FALSE(s.accepts("\x80"));  // U+0380, below alpha
  s.advance("\xb2");
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(GrammarState(g).accepts("\xa9"));  // a continuation byte with no start
  // Overlong encodings of '"' and a surrogate are not text, whatever they decode to.
  auto q = Grammar::parse(R"(root ::= "\"" | [\uD000-\uDFFF] | "x")");
  EXPECT_TRUE(GrammarState(q).accepts("\""));
  EXPECT_FALSE(GrammarState(q).accepts("\xc0\xa2"));
  EXPECT_FALSE(GrammarState(q).accepts("\xe0\x80\xa2"));
  EXPECT_FALSE(GrammarState(q).accepts("\xed\xa0\x80"));
  EXPECT_TRUE(GrammarState(q).accepts("\xed\x80\x80"));  // U+D000
  EXPECT_FALSE(GrammarState(q).accepts("\xe0\x80"));     // can only end overlong
  EXPECT_FALSE(GrammarState(q).accepts("\xed\xa0"));     // can only end a surrogate
}

TEST(Grammar, MalformedGrammarsNameThePosition) {
  EXPECT_ERROR(Grammar::parse(R"(root ::= "abc)"), "at 1:10: unterminated literal");
  EXPECT_ERROR(Grammar::parse("root ::= [a-z"), "unterminated character class");
  EXPECT_ERROR(Grammar::parse("root ::= []"), "empty character class");
  EXPECT_ERROR(Grammar::parse("root ::= [z-a]"), "reversed");
  EXPECT_ERROR(Grammar::parse("root ::= (\"a\""), "expected ')'");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\"\nroot ::= \"b\""), "at 2:1: rule 'root' is defined twice");
  EXPECT_ERROR(Grammar::parse("root ::= thing"), "at 1:10: undefined rule 'thing'");
  EXPECT_ERROR(Grammar::parse("other ::= \"a\""), "no rule named 'root'");
  EXPECT_ERROR(Grammar::parse("root = \"a\""), "expected '::='");
  EXPECT_ERROR(Grammar::parse("root ::= * \"a\""), "follows nothing");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\"**"), "follows nothing");
  EXPECT_ERROR(Grammar::parse("root ::= \"\\q\""), "unknown escape");
  EXPECT_ERROR(Grammar::parse("root ::= \"\\x4\""), "hex digits");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\"{3,1}"), "max below min");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\"{2"), "expected '}'");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\" )"), "expected the end of rule");
  EXPECT_ERROR(Grammar::parse("root ::= \"\xff\""), "invalid UTF-8");
  EXPECT_ERROR(Grammar::parse("root ::= \"a\" b ::= \"c\""), "expected a newline before rule 'b'");
}

TEST(Grammar, LeftRecursionIsRefused) {
  EXPECT_ERROR(Grammar::parse("root ::= root \"a\" | \"b\""), "left recursion: rule 'root'");
  EXPECT_ERROR(Grammar::parse("root ::= x\nx ::= y \"a\"\ny ::= \"\" | x"), "left recursion");
  EXPECT_ERROR(Grammar::parse("root ::= opt root \"a\" | \"b\"\nopt ::= \"c\"?"), "left recursion");
  // Right recursion and recursion after a character are fine.
  EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"", "aab"));
  EXPECT_TRUE(matches("root ::= \"(\" root \")\" | \"x\"", "((x))"));
}

TEST(Grammar, HostileSizesAreErrorsNotHangs) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR(Grammar::parse("root ::= \"a\"{100000}"), "repetition count above the limit");
  std::string wide = "root ::=";
  for (int i = 0; i < 600; ++i) wide += " [a-z]{2000}";
  EXPECT_ERROR(Grammar::parse(wide), "expands to more than");
  // Nested repetitions stay small: each level is one rule reference repeated.
  EXPECT_NO_THROW(Grammar::parse("root ::= ((\"a\"{2000}){2000}){2000}"));
  std::string deep = "root ::= " + std::string(10000, '(') + "\"a\"" + std::string(10000, ')');
  EXPECT_ERROR(Grammar::parse(deep), "nested deeper than 128");
  EXPECT_ERROR(Grammar::parse(std::string(2 << 20, ' ')), "more than the limit");
  // An ambiguous grammar whose parses double with every character is cut off.
  auto g = Grammar::parse("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"");
  GrammarState s(g);
  EXPECT_ERROR(for (int i = 0; i < 64; ++i) s.advance("a"), "parses alive");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace weft::model
