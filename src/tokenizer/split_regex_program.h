// Internal to split_regex*.cpp: the compiled form of a SplitRegex. A pattern is parsed into a
// tree (split_regex_parse.cpp), then flattened into a small backtracking program whose only
// recursion is a lookahead inside a lookahead, so a long text cannot overflow the stack.
#pragma once

#include "tokenizer/split_regex.h"

#include <bitset>
#include <utility>

namespace weft::tokenizer::detail::regex {

constexpr uint32_t kMaxUnit = 0x10FFFF;
constexpr uint32_t kUnbounded = UINT32_MAX;

// Inclusive unit ranges, sorted and disjoint once normalized.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
Ranges normalized(Ranges r);
Ranges complement(const Ranges& r);

// A set of units: every one of `all_of` holds it (more than one after folding (?=[a])[b]).
struct UnitSet {
  std::vector<Ranges> all_of;
  std::bitset<256> low;  // membership of units < 256, precomputed by finish()

  bool contains(uint32_t u) const { return u < 256 ? low[u] : contains_slow(u); }
  bool contains_slow(uint32_t u) const;
  void finish();
};

enum class Assertion : uint8_t { Begin, End, WordBoundary, NotWordBoundary };

struct Node {
  enum class Kind : uint8_t { Set, Seq, Alt, Repeat, Look, Assert } kind = Kind::Seq;
  std::vector<Node> kids;     // Seq, Alt: the items; Repeat, Look: the one operand
  uint32_t set = 0;           // Set: index into Program::sets
  uint32_t min = 0, max = 0;  // Repeat
  bool negate = false;        // Look: (?! ) rather than (?= )
  Assertion assertion = Assertion::Begin;
};

enum class Op : uint8_t {
  Unit,    // one unit of sets[x]
  Run,     // greedy run of min..max units of sets[x], given back one at a time on failure
  Split,   // try x, on failure y
  Jump,    // go to x
  Look,    // lookahead whose program starts at x+1 and ends in Match; go on at y
  Assert,  // assertion, zero width
  Match,
};

struct Inst {
  Op op = Op::Match;
  uint32_t x = 0, y = 0;
  uint32_t min = 0, max = 0;
  bool negate = false;
  Assertion assertion = Assertion::Begin;
};

}  // namespace weft::tokenizer::detail::regex

namespace weft::tokenizer::detail {

struct SplitRegex::Program {
  RegexText reads = RegexText::CodePoints;
  std::vector<regex::UnitSet> sets;
  std::vector<regex::Inst> code;
};

namespace regex {
// Parse `pattern` (adding its sets to `program.sets`) into a tree.
Node parse(std::string_view pattern, SplitRegex::Program& program);
}  // namespace regex

}  // namespace weft::tokenizer::detail
