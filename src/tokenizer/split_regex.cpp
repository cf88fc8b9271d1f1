// SplitRegex: tree -> backtracking program, the matcher, and regex_iterator's cutting.
#include "tokenizer/split_regex.h"

#include "core/error.h"
#include "tokenizer/split_regex_program.h"
#include "tokenizer/unicode.h"

#include <optional>

namespace weft::tokenizer::detail {
namespace regex {
namespace {

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::Set: return false;
    case Node::Kind::Seq:
      for (const Node& k : n.kids) {
        if (!nullable(k)) return false;
      }
      return true;
    case Node::Kind::Alt:
      for (const Node& k : n.kids) {
        if (nullable(k)) return true;
      }
      return false;
    case Node::Kind::Repeat: return n.min == 0 || nullable(n.kids[0]);
    case Node::Kind::Look:
    case Node::Kind::Assert: return true;
  }
  return true;
}

class Compiler {
 public:
  explicit Compiler(SplitRegex::Program& p) : p_(p) {}

  void compile(const Node& root) {
    emit(root);
    push({.op = Op::Match});
  }

 private:
  uint32_t here() const { return static_cast<uint32_t>(p_.code.size()); }
  uint32_t push(Inst in) {
    p_.code.push_back(in);
    return here() - 1;
  }

  // The set a node matches when it always matches exactly one unit: a set, or a group of
  // positive lookaheads of sets followed by a set ("(?=[\p{L}])([^a-z])", a letter not a-z),
  // folded into one set so that repeating it is a Run rather than a loop of lookaheads.
  std::optional<uint32_t> single_unit(const Node& n) {
    if (n.kind == Node::Kind::Set) return n.set;
    if (n.kind != Node::Kind::Seq || n.kids.empty()) return std::nullopt;
    if (n.kids.size() == 1) return single_unit(n.kids[0]);
    UnitSet folded;
    for (size_t i = 0; i < n.kids.size(); ++i) {
      const Node& k = n.kids[i];
      const bool last = i + 1 == n.kids.size();
      const bool lookahead = k.kind == Node::Kind::Look && !k.negate;
      if (last == lookahead) return std::nullopt;
      const std::optional<uint32_t> s = single_unit(lookahead ? k.kids[0] : k);
      if (!s) return std::nullopt;
      const UnitSet& part = p_.sets[*s];
      folded.all_of.insert(folded.all_of.end(), part.all_of.begin(), part.all_of.end());
    }
    folded.finish();
    p_.sets.push_back(std::move(folded));
    return static_cast<uint32_t>(p_.sets.size() - 1);
  }

  void emit(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Set: push({.op = Op::Unit, .x = n.set}); break;
      case Node::Kind::Seq:
        for (const Node& k : n.kids) emit(k);
        break;
      case Node::Kind::Alt: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i + 1 < n.kids.size(); ++i) {
          const uint32_t split = push({.op = Op::Split});
          p_.code[split].x = here();
          emit(n.kids[i]);
          jumps.push_back(push({.op = Op::Jump}));
          p_.code[split].y = here();
        }
        emit(n.kids.back());
        for (uint32_t j : jumps) p_.code[j].x = here();
        break;
      }
      case Node::Kind::Repeat: emit_repeat(n); break;
      case Node::Kind::Look: {
        const uint32_t look = push({.op = Op::Look, .negate = n.negate});
        emit(n.kids[0]);
        push({.op = Op::Match});
        p_.code[look].y = here();
        break;
      }
      case Node::Kind::Assert: push({.op = Op::Assert, .assertion = n.assertion}); break;
    }
  }

  void emit_repeat(const Node& n) {
    const Node& body = n.kids[0];
    if (const std::optional<uint32_t> s = single_unit(body)) {
      push({.op = Op::Run, .x = *s, .min = n.min, .max = n.max});
      return;
    }
    // A body that can match nothing would loop forever here; none of llama.cpp's patterns has one.
    if (nullable(body)) fail("tokenizer", "pre-tokenizer regex: a repeated group that can match nothing");
    for (uint32_t i = 0; i < n.min; ++i) emit(body);
    if (n.max == kUnbounded) {
      const uint32_t split = push({.op = Op::Split});
      p_.code[split].x = here();
      emit(body);
      push({.op = Op::Jump, .x = split});
      p_.code[split].y = here();
      return;
    }
    // Each optional iteration is tried only after the one before it matched.
    std::vector<uint32_t> splits;
    for (uint32_t i = n.min; i < n.max; ++i) {
      splits.push_back(push({.op = Op::Split}));
      p_.code[splits.back()].x = here();
      emit(body);
    }
    for (uint32_t s : splits) p_.code[s].y = here();
  }

  SplitRegex::Program& p_;
};

bool is_word(uint32_t u) {
  return (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || u == '_';
}

// Runs the program over one piece. Backtracking state lives in `stack_`, not on the C++ stack.
class Matcher {
 public:
  Matcher(const SplitRegex::Program& p, const std::vector<uint32_t>& units, Span piece)
      : p_(p), u_(units), piece_(piece) {}

  // The end of the preferred match starting exactly at `start`; with `non_empty`, an empty
  // match does not count (regex_iterator's retry after an empty match).
  std::optional<size_t> match_at(size_t start, bool non_empty) { return run(0, start, non_empty); }

  // Leftmost match starting at or after `from`.
  std::optional<Span> search(size_t from) {
    for (size_t s = from; s <= piece_.end; ++s) {
      if (std::optional<size_t> e = run(0, s, false)) return Span{s, *e};
    }
    return std::nullopt;
  }

 private:
  static constexpr size_t kNotRun = SIZE_MAX;
  struct Frame {
    uint32_t pc;
    size_t pos;
    size_t floor;  // a Run's shortest end: the frame gives back one unit per failure down to it
  };

  bool in_set(uint32_t set, size_t pos) const { return pos < piece_.end && p_.sets[set].contains(u_[pos]); }

  bool holds(Assertion a, size_t pos) const {
    const bool left = pos > piece_.begin && is_word(u_[pos - 1]);
    const bool right = pos < piece_.end && is_word(u_[pos]);
    switch (a) {
      case Assertion::Begin: return pos == piece_.begin;
      case Assertion::End: return pos == piece_.end;
      case Assertion::WordBoundary: return left != right;
      case Assertion::NotWordBoundary: return left == right;
    }
    return false;
  }

  std::optional<size_t> run(uint32_t pc, size_t pos, bool non_empty) {
    const size_t start = pos;
    const size_t base = stack_.size();
    for (;;) {
      const Inst& in = p_.code[pc];
      bool ok = true;
      switch (in.op) {
        case Op::Unit:
          ok = in_set(in.x, pos);
          pos += ok, ++pc;
          break;
        case Op::Run: {
          size_t n = 0;
          while (n < in.max && in_set(in.x, pos + n)) ++n;
          ok = n >= in.min;
          if (ok && n > in.min) stack_.push_back({pc + 1, pos + n, pos + in.min});
          pos += n, ++pc;
          break;
        }
        case Op::Split:
          stack_.push_back({in.y, pos, kNotRun});
          pc = in.x;
          break;
        case Op::Jump: pc = in.x; break;
        case Op::Look: ok = run(pc + 1, pos, false).has_value() != in.negate, pc = in.y; break;
        case Op::Assert: ok = holds(in.assertion, pos), ++pc; break;
        case Op::Match:
          ok = !(non_empty && pos == start);
          if (ok) {
            stack_.resize(base);
            return pos;
          }
          break;
      }
      if (ok) continue;
      if (stack_.size() == base) return std::nullopt;
      Frame& f = stack_.back();
      pc = f.pc;
      if (f.floor == kNotRun) {
        pos = f.pos;
        stack_.pop_back();
      } else {
        pos = --f.pos;
        if (f.pos == f.floor) stack_.pop_back();
      }
    }
  }

  const SplitRegex::Program& p_;
  const std::vector<uint32_t>& u_;
  Span piece_;
  std::vector<Frame> stack_;
};

}  // namespace
}  // namespace regex

std::vector<uint32_t> regex_units(RegexText kind, const std::vector<uint32_t>& cps) {
  std::vector<uint32_t> out(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    if (cp < 0x80) {
      out[i] = cp;
    } else if (unicode::is_whitespace(cp)) {
      out[i] = '\v';  // std::regex's \s is ASCII only; llama.cpp maps other whitespace here
    } else if (kind == RegexText::CodePoints) {
      out[i] = cp;
    } else {
      switch (unicode::category(cp)) {
        case unicode::Category::Number: out[i] = 0xD1; break;
        case unicode::Category::Letter: out[i] = 0xD2; break;
        case unicode::Category::Punctuation: out[i] = 0xD3; break;
        case unicode::Category::Mark: out[i] = 0xD4; break;
        case unicode::Category::Symbol: out[i] = 0xD5; break;
        default: out[i] = 0xD0; break;  // separators that are not whitespace, controls, unassigned
      }
    }
  }
  return out;
}

SplitRegex::SplitRegex(std::string_view pattern) : program_(std::make_unique<Program>()) {
  const regex::Node root = regex::parse(pattern, *program_);
  regex::Compiler(*program_).compile(root);
}

SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

RegexText SplitRegex::reads() const { return program_->reads; }

void SplitRegex::split(const std::vector<uint32_t>& units, Span piece, std::vector<Span>& out) const {
  regex::Matcher m(*program_, units, piece);
  auto add = [&](size_t b, size_t e) {
    if (e > b) out.push_back({b, e});
  };
  size_t last = piece.begin;  // end of what has been handed out
  size_t from = piece.begin;
  while (std::optional<Span> hit = m.search(from)) {
    add(last, hit->begin);
    add(hit->begin, hit->end);
    last = from = hit->end;
    if (hit->begin != hit->end) continue;
    // An empty match: regex_iterator retries a non-empty match at the same place, else searches
    // on from the next unit.
    if (hit->end == piece.end) break;
    if (std::optional<size_t> e = m.match_at(hit->end, true)) {
      add(hit->end, *e);
      last = from = *e;
    } else {
      from = hit->end + 1;
    }
  }
  add(last, piece.end);
}

}  // namespace weft::tokenizer::detail
