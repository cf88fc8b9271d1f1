// The lexer: one pass over the source, text and tags in turn. A tag's end is found by lexing its
// tokens (so a "%}" inside a string literal does not end it) with brackets counted (so the "}}"
// closing a dict literal inside {{ }} does not end the tag either), as Jinja2's lexer balances them.
#include "chat/jinja_lexer.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <cctype>

namespace weft::chat::jinja {
namespace {

std::string normalise_newlines(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& o) : src_(normalise_newlines(source)), opt_(o) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = text_then_tag(pos);
    out_.push_back({Tok::Eof, {}, 0, 0, where(src_.size())});
    return std::move(out_);
  }

 private:
  Pos where(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void error(size_t offset, const std::string& what) const {
    const Pos p = where(offset);
    fail("chat", "jinja template line {}, column {}: {}", p.line, p.col, what);
  }

  // The next tag start at or after `from`: "{{", "{%" or "{#"; npos when none.
  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // Emits the text from `pos` to the next tag with whitespace control applied, then the tag;
  // returns where lexing goes on.
  size_t text_then_tag(size_t pos) {
    const size_t tag = next_tag(pos);
    const size_t text_end = tag == std::string::npos ? src_.size() : tag;
    std::string text = src_.substr(pos, text_end - pos);
    size_t text_start = pos;  // where the text left after the previous tag's trimming starts
    if (strip_next_) {
      size_t b = 0;
      while (b < text.size() && is_space(text[b])) ++b;
      text.erase(0, b);
      text_start += b;
    } else if (trim_newline_next_ && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      ++text_start;
    }
    strip_next_ = trim_newline_next_ = false;
    if (tag != std::string::npos) {
      const char kind = src_[tag + 1];
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (marker == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && marker != '+' && opt_.lstrip_blocks) {
        lstrip_block(text, text_start);
      }
    }
    if (!text.empty()) out_.push_back({Tok::Text, std::move(text), 0, 0, where(text_start)});
    if (tag == std::string::npos) return src_.size();
    const char kind = src_[tag + 1];
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    if (kind == '#') return comment(tag, p);
    if (kind == '%' && is_raw(p)) return raw(tag, p);
    out_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, {}, 0, 0, where(tag)});
    return tag_tokens(tag, p, kind == '{');
  }

  // lstrip_blocks: the spaces and tabs between a line's start and a block tag go. The text starts
  // a line when what came before it (a newline trim_blocks or '-' took included) ends with one.
  void lstrip_block(std::string& text, size_t text_start) const {
    const size_t nl = text.rfind('\n');
    const bool line_start = nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!line_start) return;
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    for (size_t i = from; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return;
    text.erase(from);
  }

  // What follows a tag's end: `-` strips all whitespace, trim_blocks one newline after a block.
  void after_tag_end(bool dash, bool block) {
    if (dash)
      strip_next_ = true;
    else if (block && opt_.trim_blocks)
      trim_newline_next_ = true;
  }

  size_t comment(size_t tag, size_t p) {
    const size_t end = src_.find("#}", p);
    if (end == std::string::npos) error(tag, "unclosed comment {# ... (no #})");
    after_tag_end(end > p && src_[end - 1] == '-', true);
    return end + 2;
  }

  // {% raw %} ... {% endraw %}: the text between, untouched.
  bool is_raw(size_t p) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && src_[p] == '-') ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  size_t raw(size_t tag, size_t p) {
    const size_t open_end = src_.find("%}", p) + 2;
    const bool dash_open = src_[open_end - 3] == '-';
    for (size_t i = src_.find("{%", open_end); i != std::string::npos; i = src_.find("{%", i + 2)) {
      size_t q = i + 2;
      const bool dash_close = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      const bool dash_end = q < src_.size() && src_[q] == '-';
      if (dash_end) ++q;
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(open_end, i - open_end);
      if (dash_open) text.erase(0, std::find_if_not(text.begin(), text.end(), is_space) - text.begin());
      if (dash_close)
        while (!text.empty() && is_space(text.back())) text.pop_back();
      if (!text.empty()) out_.push_back({Tok::Text, std::move(text), 0, 0, where(open_end)});
      after_tag_end(dash_end, true);
      return q + 2;
    }
    error(tag, "unclosed {% raw %} (no {% endraw %})");
  }

  // The tokens of one {{ }} or {% %} tag, up to and including its end.
  size_t tag_tokens(size_t tag, size_t p, bool variable) {
    int depth = 0;
    for (;;) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) error(tag, variable ? "unclosed {{ (no }})" : "unclosed {% (no %})");
      const std::string_view end = variable ? "}}" : "%}";
      const bool dash = src_[p] == '-' && src_.compare(p + 1, 2, end) == 0;
      // "}}" ends a {{ }} tag only outside brackets (it may close a dict literal); "%}" always ends a block.
      if ((depth == 0 || !variable) && (dash || src_.compare(p, 2, end) == 0)) {
        if (dash) ++p;
        out_.push_back({variable ? Tok::VarEnd : Tok::BlockEnd, {}, 0, 0, where(p)});
        after_tag_end(dash, !variable);
        return p + 2;
      }
      p = token(p, depth);
    }
  }

  size_t token(size_t p, int& depth) {
    const char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      out_.push_back({Tok::Name, src_.substr(p, e - p), 0, 0, where(p)});
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(p);
    if (c == '\'' || c == '"') return string(p);
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo)
      if (src_.compare(p, 2, op) == 0) {
        out_.push_back({Tok::Op, std::string(op), 0, 0, where(p)});
        return p + 2;
      }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
      error(p, "unexpected character '" + std::string(1, c) + "' in a tag");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    out_.push_back({Tok::Op, std::string(1, c), 0, 0, where(p)});
    return p + 1;
  }

  size_t number(size_t p) {
    size_t e = p;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        e = q;
        digits();
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Tok::Float : Tok::Int, text, 0, 0, where(p)};
    try {
      if (is_float)
        t.float_value = std::stod(text);
      else
        t.int_value = std::stoll(text);
    } catch (const std::exception&) {
      error(p, "number '" + text + "' is out of range");
    }
    out_.push_back(std::move(t));
    return e;
  }

  // A string literal with Python's escapes (\n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh ...); an
  // unknown escape stays as written, as Python keeps it.
  size_t string(size_t p) {
    const char q = src_[p];
    std::string out;
    size_t i = p + 1;
    for (;;) {
      if (i >= src_.size()) error(p, "unclosed string literal");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // a backslash-newline continues the line
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size()) error(p, "truncated \\" + std::string(1, e) + " escape in a string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = src_[i + k];
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              error(p, "bad \\" + std::string(1, e) + " escape in a string literal");
            cp = cp * 16 +
                 static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          if (cp > 0x10FFFF) error(p, "escape beyond Unicode in a string literal");
          tokenizer::unicode::append_utf8(out, cp);
          i += n;
          break;
        }
        default: out += '\\'; out += e;
      }
    }
    out_.push_back({Tok::String, std::move(out), 0, 0, where(p)});
    return i + 1;
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  bool strip_next_ = false;         // the previous tag ended with '-'
  bool trim_newline_next_ = false;  // the previous tag was a block or comment (trim_blocks)
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) { return Lexer(source, options).run(); }

}  // namespace weft::chat::jinja
