// SplitRegex's parser: ECMAScript syntax (the subset split_regex.h lists) -> regex::Node tree.
#include "core/error.h"
#include "tokenizer/split_regex_program.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

namespace weft::tokenizer::detail::regex {
namespace {

// llama.cpp's collapsed categories (unicode.cpp, unicode_regex_split): the byte a non-ASCII code
// point of the category becomes, and the ASCII code points \p{X} also matches.
struct CollapsedCategory {
  std::string_view name;
  uint32_t unit;
  Ranges ascii;
};
const std::array<CollapsedCategory, 10>& collapsed_categories() {
  static const Ranges kLetters = {{'A', 'Z'}, {'a', 'z'}};
  static const std::array<CollapsedCategory, 10> k = {{
      {"N", 0xD1, {{'0', '9'}}},
      {"L", 0xD2, kLetters},
      {"Lu", 0xD2, kLetters},  // every letter subcategory is collapsed to "letter"
      {"Ll", 0xD2, kLetters},
      {"Lt", 0xD2, kLetters},
      {"Lm", 0xD2, kLetters},
      {"Lo", 0xD2, kLetters},
      {"P",
       0xD3,
       {{0x21, 0x23},
        {0x25, 0x2A},
        {0x2C, 0x2F},
        {0x3A, 0x3B},
        {0x3F, 0x40},
        {0x5B, 0x5D},
        {0x5F, 0x5F},
        {0x7B, 0x7B},
        {0x7D, 0x7D}}},
      {"M", 0xD4, {}},
      {"S", 0xD5, {{0x24, 0x24}, {0x2B, 0x2B}, {0x3C, 0x3E}, {0x5E, 0x5E}, {0x60, 0x60}, {0x7C, 0x7C}}},  // no '~'
  }};
  return k;
}

const Ranges kSpace = {{0x09, 0x0D}, {0x20, 0x20}};  // \s of std::regex in the C locale
const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kLineEnd = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

bool names_category(std::string_view pattern) {
  return std::any_of(collapsed_categories().begin(), collapsed_categories().end(), [&](const CollapsedCategory& c) {
    return pattern.find("\\p{" + std::string(c.name) + "}") != std::string_view::npos;
  });
}

// One item inside [..] or after a backslash: a single unit or a set of them.
struct ClassAtom {
  std::optional<uint32_t> unit;
  Ranges set;
};

class Parser {
 public:
  Parser(std::string_view pattern, SplitRegex::Program& program) : pattern_(pattern), program_(program) {
    for (const unicode::CodePoint& c : unicode::decode_utf8(pattern)) {
      if (c.cp == unicode::kReplacement && pattern.substr(c.offset, c.n_bytes) != "\xEF\xBF\xBD") {
        error("invalid UTF-8");
      }
      p_.push_back(c.cp);
    }
    program_.reads = names_category(pattern) ? RegexText::Collapsed : RegexText::CodePoints;
  }

  Node parse() {
    Node root = alternation();
    if (!done()) error("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail("tokenizer", "pre-tokenizer regex '{}': {} at character {}", pattern_, what, i_);
  }
  bool done() const { return i_ >= p_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
  uint32_t next() {
    if (done()) error("unexpected end");
    return p_[i_++];
  }
  bool eat(uint32_t c) {
    if (done() || p_[i_] != c) return false;
    ++i_;
    return true;
  }

  Node set_node(Ranges r) {
    UnitSet s;
    s.all_of.push_back(normalized(std::move(r)));
    s.finish();
    program_.sets.push_back(std::move(s));
    Node n{.kind = Node::Kind::Set};
    n.set = static_cast<uint32_t>(program_.sets.size() - 1);
    return n;
  }

  Node alternation() {
    Node first = sequence();
    if (peek() != '|') return first;
    Node alt{.kind = Node::Kind::Alt};
    alt.kids.push_back(std::move(first));
    while (eat('|')) alt.kids.push_back(sequence());
    return alt;
  }

  Node sequence() {
    Node seq{.kind = Node::Kind::Seq};
    while (!done() && peek() != '|' && peek() != ')') seq.kids.push_back(quantified());
    return seq;
  }

  uint32_t number() {
    if (peek() < '0' || peek() > '9') error("expected a number in {}");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (next() - '0');
      if (v > 100000) error("repeat count too large");
    }
    return static_cast<uint32_t>(v);
  }

  Node quantified() {
    Node atom = this->atom();
    uint32_t min = 0, max = 0;
    if (eat('*')) {
      min = 0, max = kUnbounded;
    } else if (eat('+')) {
      min = 1, max = kUnbounded;
    } else if (eat('?')) {
      min = 0, max = 1;
    } else if (eat('{')) {
      min = max = number();
      if (eat(',')) max = peek() == '}' ? kUnbounded : number();
      if (!eat('}')) error("expected '}'");
      if (max < min) error("{n,m} with m < n");
    } else {
      return atom;
    }
    if (atom.kind == Node::Kind::Look || atom.kind == Node::Kind::Assert) error("nothing to repeat");
    if (peek() == '?' || peek() == '+') error("lazy and possessive quantifiers are not supported");
    if (peek() == '*' || peek() == '{') error("nothing to repeat");
    Node rep{.kind = Node::Kind::Repeat, .min = min, .max = max};
    rep.kids.push_back(std::move(atom));
    return rep;
  }

  Node group() {
    Node n;
    if (eat('?')) {
      if (eat(':')) {
        n = alternation();
      } else if (peek() == '=' || peek() == '!') {
        n = Node{.kind = Node::Kind::Look, .negate = next() == '!'};
        n.kids.push_back(alternation());
      } else {
        error("only (?: ), (?= ) and (?! ) groups are supported");
      }
    } else {
      n = alternation();  // captures are not kept (llama.cpp compiles with nosubs)
    }
    if (!eat(')')) error("expected ')'");
    return n;
  }

  Node atom() {
    const uint32_t c = next();
    switch (c) {
      case '(': return group();
      case '[': return set_node(bracket());
      case '.': return set_node(complement(normalized(kLineEnd)));
      case '^': return Node{.kind = Node::Kind::Assert, .assertion = Assertion::Begin};
      case '$': return Node{.kind = Node::Kind::Assert, .assertion = Assertion::End};
      case '*':
      case '+':
      case '?':
      case '{':
      case '}':
      case ']': error("unexpected quantifier or bracket");
      case '\\':
        if (eat('b')) return Node{.kind = Node::Kind::Assert, .assertion = Assertion::WordBoundary};
        if (eat('B')) return Node{.kind = Node::Kind::Assert, .assertion = Assertion::NotWordBoundary};
        return set_node(as_ranges(escape()));
      default: return set_node({{literal(c), literal(c)}});
    }
  }

  uint32_t literal(uint32_t c) const {
    // Collapsed text holds no code point past ASCII, so such a literal could never match there.
    if (program_.reads == RegexText::Collapsed && c >= 0x80) error("a non-ASCII character beside \\p{..}");
    return c;
  }

  static Ranges as_ranges(const ClassAtom& a) { return a.unit ? Ranges{{*a.unit, *a.unit}} : a.set; }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const uint32_t d = next();
      const int x = d >= '0' && d <= '9'   ? int(d - '0')
                    : d >= 'a' && d <= 'f' ? int(d - 'a' + 10)
                    : d >= 'A' && d <= 'F' ? int(d - 'A' + 10)
                                           : -1;
      if (x < 0) error("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(x);
    }
    return v;
  }

  Ranges category() {
    if (!eat('{')) error("expected '{' after \\p");
    std::string name;
    while (!done() && peek() != '}') name += static_cast<char>(next() & 0x7F);
    if (!eat('}')) error("unterminated \\p{");
    for (const CollapsedCategory& cat : collapsed_categories()) {
      if (cat.name == name) {
        Ranges r = cat.ascii;
        r.push_back({cat.unit, cat.unit});
        return r;
      }
    }
    error("unknown category \\p{" + name + "}");
  }

  // After a backslash (inside or outside a class).
  ClassAtom escape() {
    const uint32_t c = next();
    switch (c) {
      case 'd': return {std::nullopt, kDigit};
      case 'D': return {std::nullopt, complement(kDigit)};
      case 's': return {std::nullopt, kSpace};
      case 'S': return {std::nullopt, complement(kSpace)};
      case 'w': return {std::nullopt, kWord};
      case 'W': return {std::nullopt, complement(kWord)};
      case 'p': return {std::nullopt, category()};
      case 'r': return {'\r', {}};
      case 'n': return {'\n', {}};
      case 't': return {'\t', {}};
      case 'v': return {'\v', {}};
      case 'f': return {'\f', {}};
      case '0': return {0u, {}};
      case 'x': return {hex(2), {}};
      case 'u': return {hex(4), {}};
      default:
        // Identity escapes of punctuation (\$ \[ \- ...); a letter or digit would be a feature
        // this engine does not have.
        if (c < 0x80 && std::isalnum(static_cast<int>(c))) error("unsupported escape");
        return {literal(c), {}};
    }
  }

  ClassAtom class_atom() {
    const uint32_t c = next();
    if (c == '\\') return escape();
    return {literal(c), {}};
  }

  Ranges bracket() {
    const bool negated = eat('^');
    Ranges r;
    while (!eat(']')) {
      if (done()) error("unterminated [");
      const ClassAtom lo = class_atom();
      if (lo.unit && peek() == '-' && peek(1) != ']' && peek(1) != 0) {
        next();
        const ClassAtom hi = class_atom();
        if (!hi.unit || *hi.unit < *lo.unit) error("bad range in [..]");
        r.push_back({*lo.unit, *hi.unit});
      } else {
        const Ranges more = as_ranges(lo);
        r.insert(r.end(), more.begin(), more.end());
      }
    }
    r = normalized(std::move(r));
    return negated ? complement(r) : r;
  }

  std::string_view pattern_;
  SplitRegex::Program& program_;
  std::vector<uint32_t> p_;
  size_t i_ = 0;
};

}  // namespace

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalized(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxUnit) out.push_back({next, kMaxUnit});
  return out;
}

bool UnitSet::contains_slow(uint32_t u) const {
  return std::all_of(all_of.begin(), all_of.end(), [u](const Ranges& r) {
    auto it = std::upper_bound(r.begin(), r.end(), u, [](uint32_t v, const auto& range) { return v < range.first; });
    return it != r.begin() && u <= (it - 1)->second;
  });
}

void UnitSet::finish() {
  for (uint32_t u = 0; u < 256; ++u) low[u] = contains_slow(u);
}

Node parse(std::string_view pattern, SplitRegex::Program& program) { return Parser(pattern, program).parse(); }

}  // namespace weft::tokenizer::detail::regex
