// GBNF grammars (llama.cpp's format, grammars/README.md) and the pushdown automaton that constrains
// decoding to them, after llama.cpp's llama-grammar: a parse is a stack of element positions, the
// state a set of such stacks, advanced code point by code point over a token's text bytes.
//
//   auto g = model::Grammar::parse(R"(root ::= "yes" | "no")");
//   model::GrammarState s(g);
//   s.accepts("ye");  // true: a prefix of a sentence
//   s.advance("ye"); s.complete();  // false until "s" follows
//
// Untrusted input: parse() bounds the text, the rules, the elements repetitions expand to and the
// nesting depth, refuses undefined rules and left recursion, and throws weft::Error("grammar", ...)
// naming the position (line:column) of what is wrong. A state bounds its set of stacks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::model {

struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;   // grammar source
  size_t max_elements = 1 << 20;     // after repetitions are expanded
  int32_t max_nesting = 128;         // parentheses inside parentheses
  int32_t max_repetition = 2000;     // m and n of {m,n} (llama.cpp's MAX_REPETITION_THRESHOLD)
  size_t max_stacks = 4096;          // parses alive at once in a GrammarState
  size_t max_stack_depth = 1 << 16;  // rule positions on one stack
};

enum class GrammarElemType : uint8_t {
  End,             // end of a rule's last alternative
  Alt,             // start of the next alternative
  RuleRef,         // value: rule id
  Char,            // value: code point; may be followed by CharAlt / CharRangeUpper
  CharNot,         // like Char, the class negated
  CharRangeUpper,  // value: upper bound of the range started by the element before
  CharAlt,         // value: another code point (or range start) of the same class
  CharAny,         // '.': any code point
};

struct GrammarElem {
  GrammarElemType type;
  uint32_t value;
};

// A parsed grammar: immutable, shared by every sequence it constrains.
class Grammar {
 public:
  // Parses GBNF text; `root` names the start rule. Throws weft::Error("grammar", ...).
  static std::shared_ptr<const Grammar> parse(std::string_view text, std::string_view root = "root",
                                              const GrammarLimits& limits = {});

  // Rule i: alternatives separated by Alt, ended by End.
  const std::vector<std::vector<GrammarElem>>& rules() const { return rules_; }
  uint32_t root() const { return root_; }
  const std::string& rule_name(uint32_t id) const { return names_[id]; }
  const GrammarLimits& limits() const { return limits_; }

 private:
  friend class GrammarParser;
  std::vector<std::vector<GrammarElem>> rules_;
  std::vector<std::string> names_;
  uint32_t root_ = 0;
  GrammarLimits limits_;
};

// Where one sequence stands in its grammar: every parse still alive (a stack of positions, the top
// the next element to match, an empty stack a finished parse) and the bytes of a code point that a
// token left unfinished. Copyable; advancing one copy leaves the others as they were.
class GrammarState {
 public:
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Whether these bytes (a token's text) can follow: every whole code point matched, and a trailing
  // partial one the start of one that some parse could take.
  bool accepts(std::string_view bytes) const;
  // Takes the bytes; throws weft::Error("grammar", ...) when they cannot follow.
  void advance(std::string_view bytes);
  // A sentence is finished here (end of generation allowed).
  bool complete() const;
  // Nothing more can follow: complete and no parse waits for more.
  bool finished() const;

  const Grammar& grammar() const { return *grammar_; }

 private:
  using Stack = std::vector<const GrammarElem*>;
  struct Partial {
    uint32_t value = 0;     // bits of the code point read so far
    int32_t remaining = 0;  // continuation bytes still to come
    int32_t length = 1;     // bytes of the whole sequence
  };
  // Runs the bytes from stacks_ / `partial` into `stacks` / `partial`; false when they cannot follow.
  bool step(std::string_view bytes, std::vector<Stack>& stacks, Partial& partial) const;

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  Partial partial_;
};

// Whether the grammar derives exactly this text (tests, validation).
bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace weft::model
