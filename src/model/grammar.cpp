// The grammar's pushdown automaton, as llama.cpp's llama-grammar runs it: a state is a set of
// stacks of element positions; expanding a stack whose top is a rule reference replaces it by one
// stack per alternative (the position after the reference kept below), until every top is a
// character element or the stack is empty (a finished parse). A code point advances each stack
// whose top matches it. Left recursion is refused at parse, so expansion ends.
#include "model/grammar.h"

#include "core/error.h"

#include <algorithm>

namespace weft::model {

using E = GrammarElemType;

namespace {

bool ends_alternative(const GrammarElem* e) { return e->type == E::End || e->type == E::Alt; }

// Whether the class starting at `e` admits code point c.
bool char_matches(const GrammarElem* e, uint32_t c) {
  if (e->type == E::CharAny) return true;
  bool positive = e->type == E::Char;
  bool found = false;
  do {
    if (e[1].type == E::CharRangeUpper) {
      found = found || (e->value <= c && c <= e[1].value);
      e += 2;
    } else {
      found = found || e->value == c;
      e += 1;
    }
  } while (e->type == E::CharAlt);
  return found == positive;
}

// Whether some code point in [lo, hi] (every completion of a partial UTF-8 sequence) could match
// the class at `e`. A negated class or '.' is taken to admit one (a class excluding a whole
// completion range is not worth the check: the next token would then find no continuation).
bool char_may_match(const GrammarElem* e, uint32_t lo, uint32_t hi) {
  if (e->type != E::Char) return true;
  do {
    uint32_t a = e->value, b = e[1].type == E::CharRangeUpper ? e[1].value : e->value;
    if (a <= hi && lo <= b) return true;
    e += e[1].type == E::CharRangeUpper ? 2 : 1;
  } while (e->type == E::CharAlt);
  return false;
}

// The element after the class that starts at `e`.
const GrammarElem* after_char(const GrammarElem* e) {
  if (e->type == E::CharAny) return e + 1;
  do e += e[1].type == E::CharRangeUpper ? 2 : 1;
  while (e->type == E::CharAlt);
  return e;
}

}  // namespace

// Expands `stack` into stacks whose tops are characters (or that are empty), appended to `out`.
static void expand(const Grammar& g, std::vector<const GrammarElem*> stack,
                   std::vector<std::vector<const GrammarElem*>>& out) {
  std::vector<std::vector<const GrammarElem*>> work;
  work.push_back(std::move(stack));
  while (!work.empty()) {
    auto s = std::move(work.back());
    work.pop_back();
    if (s.empty() || s.back()->type != E::RuleRef) {
      out.push_back(std::move(s));
      if (out.size() > g.limits().max_stacks)
        fail("grammar", "more than {} parses alive at once (an ambiguous grammar)", g.limits().max_stacks);
      continue;
    }
    const GrammarElem* ref = s.back();
    s.pop_back();
    if (!ends_alternative(ref + 1)) s.push_back(ref + 1);
    const GrammarElem* alt = g.rules()[ref->value].data();
    while (true) {
      auto next = s;
      if (!ends_alternative(alt)) next.push_back(alt);
      if (next.size() > g.limits().max_stack_depth)
        fail("grammar", "a parse nests deeper than {} rules", g.limits().max_stack_depth);
      work.push_back(std::move(next));
      while (!ends_alternative(alt)) ++alt;
      if (alt->type == E::End) break;
      ++alt;  // past Alt
    }
  }
}

static void dedup(std::vector<std::vector<const GrammarElem*>>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  const auto& root = grammar_->rules()[grammar_->root()];
  const GrammarElem* alt = root.data();
  while (true) {
    Stack s;
    if (!ends_alternative(alt)) s.push_back(alt);
    expand(*grammar_, std::move(s), stacks_);
    while (!ends_alternative(alt)) ++alt;
    if (alt->type == E::End) break;
    ++alt;
  }
  dedup(stacks_);
}

// The least code point a UTF-8 sequence of each length may encode (less is an overlong form).
static constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};

bool GrammarState::step(std::string_view bytes, std::vector<Stack>& stacks, Partial& partial) const {
  // `stacks` is read from stacks_ until the first whole code point (no copy for a token the first
  // character already refuses, the common case among candidates).
  const std::vector<Stack>* cur = &stacks_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (partial.remaining > 0) {
      if ((b & 0xC0) != 0x80) return false;
      partial.value = (partial.value << 6) | (b & 0x3F);
      if (--partial.remaining > 0) continue;
    } else {
      int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
      if (n == 0 || b == 0xC0 || b == 0xC1) return false;  // a lone continuation byte, an overlong start, no UTF-8
      partial.value = n == 1 ? b : b & (0xFF >> (n + 1));
      partial.remaining = n - 1;
      partial.length = n;
      if (partial.remaining > 0) continue;
    }
    uint32_t c = partial.value;
    // Overlong forms ("\xE0\x80\xA2" is not '"'), surrogates and values past U+10FFFF are not text.
    if (c < kMinOfLength[partial.length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    std::vector<Stack> next;
    for (const Stack& s : *cur) {
      if (s.empty() || !char_matches(s.back(), c)) continue;
      Stack t(s.begin(), s.end() - 1);
      const GrammarElem* after = after_char(s.back());
      if (!ends_alternative(after)) t.push_back(after);
      expand(*grammar_, std::move(t), next);
    }
    dedup(next);
    stacks = std::move(next);
    cur = &stacks;
    if (stacks.empty()) return false;
  }
  if (cur == &stacks_) stacks = stacks_;
  if (partial.remaining > 0) {
    // The token ends inside a code point: some parse must be able to take one that starts so.
    uint32_t lo = partial.value << (6 * partial.remaining);
    uint32_t hi = std::min<uint32_t>(lo | ((1u << (6 * partial.remaining)) - 1), 0x10FFFF);
    lo = std::max(lo, kMinOfLength[partial.length]);  // only the completions that are not overlong
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    return std::any_of(cur->begin(), cur->end(),
                       [&](const Stack& s) { return !s.empty() && char_may_match(s.back(), lo, hi); });
  }
  return true;
}

bool GrammarState::accepts(std::string_view bytes) const {
  std::vector<Stack> stacks;
  Partial partial = partial_;
  return step(bytes, stacks, partial);
}

void GrammarState::advance(std::string_view bytes) {
  std::vector<Stack> stacks;
  Partial partial = partial_;
  if (!step(bytes, stacks, partial)) fail("grammar", "the text does not continue the grammar");
  stacks_ = std::move(stacks);
  partial_ = partial;
}

bool GrammarState::complete() const {
  return partial_.remaining == 0 &&
         std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarState::finished() const {
  return partial_.remaining == 0 &&
         std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool grammar_matches(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  GrammarState s(grammar);
  return s.accepts(text) && (s.advance(text), s.complete());
}

}  // namespace weft::model
