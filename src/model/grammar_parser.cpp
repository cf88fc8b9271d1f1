// GBNF text -> Grammar: a recursive-descent parser over llama.cpp's syntax (grammars/README.md):
//   rule      ::= name "::=" alternates (newline-terminated; newlines allowed inside parentheses)
//   alternates::= sequence ("|" sequence)*
//   sequence  ::= (primary repetition?)*
//   primary   ::= name | "literal" | [class] | [^class] | . | "(" alternates ")"
//   repetition::= * | + | ? | {m} | {m,} | {m,n}
// Repetitions become generated rules as llama.cpp makes them (x* ::= x x* | ), so the automaton
// only ever sees sequences, alternatives and rule references.
#include "model/grammar.h"

#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace weft::model {

using E = GrammarElemType;

class GrammarParser {
 public:
  GrammarParser(std::string_view text, const GrammarLimits& limits) : src_(text), limits_(limits) {}

  std::shared_ptr<const Grammar> run(std::string_view root) {
    if (src_.size() > limits_.max_text_bytes)
      fail("grammar", "grammar is {} bytes, more than the limit of {}", src_.size(), limits_.max_text_bytes);
    g_ = std::make_shared<Grammar>();
    g_->limits_ = limits_;
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t i = 0; i < g_->rules_.size(); ++i)
      if (!defined_[i]) fail("grammar", "at {}: undefined rule '{}'", where(first_use_[i]), g_->names_[i]);
    auto it = ids_.find(std::string(root));
    if (it == ids_.end()) fail("grammar", "grammar has no rule named '{}'", root);
    g_->root_ = it->second;
    check_left_recursion();
    return g_;
  }

 private:
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // "line:column" of a byte offset, for errors.
  std::string where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return fmt::format("{}:{}", line, col);
  }
  template <typename... Args>
  [[noreturn]] void error(size_t at, fmt::format_string<Args...> f, Args&&... args) const {
    fail("grammar", "at {}: {}", where(at), fmt::format(f, std::forward<Args>(args)...));
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= src_.size(); }

  // Spaces, tabs and comments; newlines too where `newlines` (inside parentheses, between rules).
  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_word(peek())) ++pos_;
    if (pos_ == start) error(start, "expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t symbol(const std::string& name, size_t used_at) {
    auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(g_->rules_.size()));
    if (added) {
      if (g_->rules_.size() >= limits_.max_elements) error(used_at, "too many rules");
      g_->rules_.emplace_back();
      g_->names_.push_back(name);
      defined_.push_back(false);
      first_use_.push_back(used_at);
    }
    return it->second;
  }

  uint32_t generated_symbol(const std::string& base) {
    std::string name;
    do name = fmt::format("{}-{}", base, next_generated_++);
    while (ids_.count(name));
    uint32_t id = symbol(name, pos_);
    defined_[id] = true;
    return id;
  }

  void count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > limits_.max_elements)
      error(pos_, "grammar expands to more than {} elements (repetitions?)", limits_.max_elements);
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      char c = peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) error(pos_, "expected {} hex digits", digits);
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) error(pos_, "code point U+{:X} is beyond Unicode", v);
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  uint32_t parse_char() {
    if (at_end()) error(pos_, "unexpected end of grammar");
    size_t start = pos_;
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      char e = peek(1);
      pos_ += 2;
      switch (e) {
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^': return static_cast<uint32_t>(e);
        default: error(start, "unknown escape '\\{}'", e == '\0' ? std::string("<end>") : std::string(1, e));
      }
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0) error(start, "invalid UTF-8 byte 0x{:02x}", c);
    uint32_t v = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int i = 1; i < n; ++i) {
      unsigned char k = static_cast<unsigned char>(peek(i));
      if (pos_ + i >= src_.size() || (k & 0xC0) != 0x80) error(start, "invalid UTF-8 sequence");
      v = (v << 6) | (k & 0x3F);
    }
    pos_ += n;
    return v;
  }

  void parse_rule() {
    size_t start = pos_;
    std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") error(pos_, "expected '::=' after rule name '{}'", name);
    pos_ += 3;
    skip_space(true);
    uint32_t id = symbol(name, start);
    if (defined_[id]) error(start, "rule '{}' is defined twice", name);
    defined_[id] = true;
    std::vector<GrammarElem> body;
    parse_alternates(name, body, 0);
    body.push_back({E::End, 0});
    count(1);
    g_->rules_[id] = std::move(body);
    skip_space(false);
    if (!at_end() && peek() != '\n' && peek() != '\r') error(pos_, "expected the end of rule '{}'", name);
  }

  void parse_alternates(const std::string& name, std::vector<GrammarElem>& out, int32_t depth) {
    parse_sequence(name, out, depth);
    while (peek() == '|') {
      ++pos_;
      out.push_back({E::Alt, 0});
      count(1);
      skip_space(depth > 0);
      parse_sequence(name, out, depth);
    }
  }

  void parse_sequence(const std::string& name, std::vector<GrammarElem>& out, int32_t depth) {
    skip_space(depth > 0);
    size_t last_start = out.size();  // where the last primary's elements begin (for a repetition)
    bool have_last = false;
    while (!at_end()) {
      char c = peek();
      size_t here = pos_;
      if (c == '"') {
        ++pos_;
        last_start = out.size();
        while (peek() != '"') {
          if (at_end() || peek() == '\n') error(here, "unterminated literal");
          out.push_back({E::Char, parse_char()});
          count(1);
        }
        ++pos_;
        have_last = true;
      } else if (c == '[') {
        ++pos_;
        last_start = out.size();
        E first = E::Char;
        if (peek() == '^') {
          ++pos_;
          first = E::CharNot;
        }
        bool any = false;
        while (peek() != ']') {
          if (at_end()) error(here, "unterminated character class");
          uint32_t lo = parse_char();
          out.push_back({any ? E::CharAlt : first, lo});
          any = true;
          count(1);
          if (peek() == '-' && peek(1) != ']') {
            ++pos_;
            if (at_end()) error(here, "unterminated character class");
            uint32_t hi = parse_char();
            if (hi < lo) error(here, "character range is reversed (U+{:X} > U+{:X})", lo, hi);
            out.push_back({E::CharRangeUpper, hi});
            count(1);
          }
        }
        if (!any) error(here, "empty character class");
        ++pos_;
        have_last = true;
      } else if (c == '.') {
        ++pos_;
        last_start = out.size();
        out.push_back({E::CharAny, 0});
        count(1);
        have_last = true;
      } else if (is_word(c)) {
        std::string ref = parse_name();
        skip_space(depth > 0);
        if (src_.substr(pos_, 3) == "::=") {  // the next rule starts: this sequence ended a line early
          pos_ = here;
          error(here, "expected a newline before rule '{}'", ref);
        }
        pos_ = here + ref.size();
        last_start = out.size();
        out.push_back({E::RuleRef, symbol(ref, here)});
        count(1);
        have_last = true;
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) error(here, "parentheses nested deeper than {}", limits_.max_nesting);
        ++pos_;
        // A group becomes a rule of its own so that its alternatives do not leak into the sequence.
        std::vector<GrammarElem> body;
        parse_alternates(name, body, depth + 1);
        skip_space(true);
        if (peek() != ')') error(here, "expected ')' to close the '(' here");
        ++pos_;
        body.push_back({E::End, 0});
        count(1);
        uint32_t id = generated_symbol(name);
        g_->rules_[id] = std::move(body);
        last_start = out.size();
        out.push_back({E::RuleRef, id});
        count(1);
        have_last = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) error(here, "'{}' follows nothing it could repeat", c);
        ++pos_;
        int32_t min = 0, max = -1;  // -1: unbounded
        if (c == '+') min = 1;
        if (c == '?') max = 1;
        if (c == '{') {
          skip_space(depth > 0);
          min = parse_count(here);
          max = min;
          skip_space(depth > 0);
          if (peek() == ',') {
            ++pos_;
            skip_space(depth > 0);
            max = std::isdigit(static_cast<unsigned char>(peek())) ? parse_count(here) : -1;
            skip_space(depth > 0);
          }
          if (peek() != '}') error(here, "expected '}}' to close the repetition");
          ++pos_;
          if (max >= 0 && max < min) error(here, "repetition {{{},{}}} has max below min", min, max);
        }
        repeat(name, out, last_start, min, max);
        have_last = false;  // "x**" is an error, as in llama.cpp
      } else {
        break;
      }
      skip_space(depth > 0);
    }
  }

  int32_t parse_count(size_t rep_at) {
    size_t start = pos_;
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + (peek() - '0');
      if (v > limits_.max_repetition) error(rep_at, "repetition count above the limit of {}", limits_.max_repetition);
      ++pos_;
    }
    if (pos_ == start) error(pos_, "expected a number in the repetition");
    return static_cast<int32_t>(v);
  }

  // Replaces out[from..] (one primary, x) by x{min,max}: x repeated min times, then either
  // x-rest ::= x x-rest | (unbounded) or max - min nested optionals x-opt ::= x x-opt' | .
  void repeat(const std::string& name, std::vector<GrammarElem>& out, size_t from, int32_t min, int32_t max) {
    std::vector<GrammarElem> x(out.begin() + static_cast<std::ptrdiff_t>(from), out.end());
    out.resize(from);
    if (x.size() > 1 && (min > 1 || max != min)) {
      // A multi-element primary (a literal) repeated: make it one rule so copies stay small.
      std::vector<GrammarElem> body = x;
      body.push_back({E::End, 0});
      count(body.size());
      uint32_t id = generated_symbol(name);
      g_->rules_[id] = std::move(body);
      x = {{E::RuleRef, id}};
    }
    for (int32_t i = 0; i < min; ++i) {
      count(x.size());
      out.insert(out.end(), x.begin(), x.end());
    }
    if (max == min) return;
    uint32_t id = generated_symbol(name);
    if (max < 0) {
      std::vector<GrammarElem> body = x;  // rest ::= x rest |
      body.push_back({E::RuleRef, id});
      body.push_back({E::Alt, 0});
      body.push_back({E::End, 0});
      count(body.size());
      g_->rules_[id] = std::move(body);
    } else {
      // opt_k ::= x opt_{k-1} | , built from the innermost out.
      uint32_t inner = id;
      std::vector<GrammarElem> body = x;
      body.push_back({E::Alt, 0});
      body.push_back({E::End, 0});
      count(body.size());
      g_->rules_[inner] = std::move(body);
      for (int32_t k = 1; k < max - min; ++k) {
        uint32_t outer = generated_symbol(name);
        std::vector<GrammarElem> b = x;
        b.push_back({E::RuleRef, inner});
        b.push_back({E::Alt, 0});
        b.push_back({E::End, 0});
        count(b.size());
        g_->rules_[outer] = std::move(b);
        inner = outer;
      }
      id = inner;
    }
    out.push_back({E::RuleRef, id});
    count(1);
  }

  // A rule that can reach itself without consuming a character would make the automaton expand
  // forever: refuse it, naming the rule.
  void check_left_recursion() const {
    const auto& rules = g_->rules_;
    size_t n = rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        bool alt_nullable = true;
        for (const GrammarElem& e : rules[r]) {
          if (e.type == E::Alt || e.type == E::End) {
            if (alt_nullable) {
              nullable[r] = true;
              changed = true;
              break;
            }
            alt_nullable = true;
          } else if (e.type == E::RuleRef) {
            alt_nullable = alt_nullable && nullable[e.value];
          } else if (e.type != E::CharAlt && e.type != E::CharRangeUpper) {
            alt_nullable = false;
          }
        }
      }
    }
    // Edges r -> s where s can come first in r (after nullable references only).
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; ++r) {
      bool leading = true;
      for (const GrammarElem& e : rules[r]) {
        if (e.type == E::Alt || e.type == E::End) {
          leading = true;
        } else if (leading && e.type == E::RuleRef) {
          first[r].push_back(e.value);
          leading = nullable[e.value];
        } else if (e.type != E::CharAlt && e.type != E::CharRangeUpper) {
          leading = false;
        }
      }
    }
    // Iterative DFS with colours: a grey node reached again is a cycle.
    std::vector<uint8_t> colour(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (colour[s]) continue;
      std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(s), 0}};
      colour[s] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i == first[r].size()) {
          colour[r] = 2;
          stack.pop_back();
          continue;
        }
        uint32_t next = first[r][i++];
        if (colour[next] == 1)
          fail("grammar", "left recursion: rule '{}' can reach itself before any character", g_->names_[next]);
        if (colour[next] == 0) {
          colour[next] = 1;
          stack.push_back({next, 0});
        }
      }
    }
  }

  std::string_view src_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  size_t n_elements_ = 0;
  uint32_t next_generated_ = 1;
  std::shared_ptr<Grammar> g_;
  std::map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // byte offset of each rule's first use
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, std::string_view root,
                                              const GrammarLimits& limits) {
  return GrammarParser(text, limits).run(root);
}

}  // namespace weft::model
