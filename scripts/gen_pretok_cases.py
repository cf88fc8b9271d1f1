#!/usr/bin/env python3
"""Generate tests/tokenizer/pretok_cases.inc: expected pre-tokenizer splits of every regex family.

An independent model of llama.cpp's unicode_regex_split (src/unicode.cpp) on Python's own regex
engine (`re`): each pattern of a family's list cuts every piece the earlier ones left into its
matches and the stretches between them (std::regex_iterator's order). A pattern naming a category
(\\p{L} ...) runs on the "collapsed" text (ASCII as is, other code points one byte per category,
non-ASCII whitespace as \\v), its \\p{X} rewritten to "that byte or X's ASCII members" exactly as
llama.cpp rewrites it; other patterns run on the code points with non-ASCII whitespace as \\v.
Classes are ASCII (re.ASCII), as std::regex's are in the C locale.

The patterns are read from src/tokenizer/tokenizer_pretok*.cpp, so weft's table and this model
share them; what the tests check is weft's regex engine, its cutting and the hand-written GPT-2 /
Llama 3 splits against Python's engine. Families needing llama.cpp's hand-written code beyond a
regex (kimi-k2, afmoe) are left out; their tests are written by hand.

Usage: python3 scripts/gen_pretok_cases.py > tests/tokenizer/pretok_cases.inc
"""
import re
import sys
import unicodedata
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" for [\[ ... ]

# --- weft's pattern table, read from its C++ source ------------------------------------------

ESCAPES = {"r": "\r", "n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}


def cpp_tokens(src):
    """'{', '}', ('str', value) and ('id', name) tokens of C++ source, comments skipped."""
    i = 0
    while i < len(src):
        if src.startswith("//", i):
            i = src.index("\n", i)
        elif m := re.match(r'R"([^(]*)\(', src[i:]):
            end = src.index(")" + m.group(1) + '"', i)
            yield ("str", src[i + len(m.group(0)):end])
            i = end + len(m.group(1)) + 2
        elif src[i] == '"':
            j, val = i + 1, ""
            while src[j] != '"':
                if src[j] == "\\":
                    val += ESCAPES[src[j + 1]]
                    j += 2
                else:
                    val += src[j]
                    j += 1
            yield ("str", val)
            i = j + 1
        elif m := re.match(r"[A-Za-z_][\w:]*", src[i:]):
            yield ("id", m.group(0))
            i += len(m.group(0))
        elif src[i] in "{}":
            yield src[i]
            i += 1
        else:
            i += 1


def pattern_constants():
    consts = {}
    custom = (ROOT / "src/tokenizer/tokenizer_pretok_custom.cpp").read_text()
    body = custom[custom.index("std::string_view custom_split_pattern") : custom.index("ClassifiedText::ClassifiedText")]
    for m in re.finditer(r"case CustomSplit::(\w+):\s*(?:return\s*)?", body):
        consts["CustomSplit::" + m.group(1)] = next(t for t in cpp_tokens(body[m.end():]) if t[0] == "str")[1]
    src = (ROOT / "src/tokenizer/tokenizer_pretok.cpp").read_text()
    for m in re.finditer(r"(k[A-Z]\w*) =\s*", src):
        tok = next(cpp_tokens(src[m.end():]))
        line = src[m.end():src.index(";", m.end())]
        if tok[0] == "str":
            consts[m.group(1)] = tok[1]
        elif c := re.search(r"CustomSplit::\w+", line):  # kGpt2 = custom_split_pattern(CustomSplit::Gpt2)
            consts[m.group(1)] = consts[c.group(0)]
    return consts, src


def families():
    """[(type, names, patterns)] from families() in tokenizer_pretok.cpp."""
    consts, src = pattern_constants()
    body = src[src.index("static const std::vector<Family> k = {") :]
    body = body[body.index("{") + 1 : body.index("return k;")]
    out, stack = [], []
    for t in cpp_tokens(body):
        if t == "{":
            stack.append([])
        elif t == "}":
            if not stack:
                continue
            done = stack.pop()
            if not stack:
                if done:
                    out.append(done)
            else:
                stack[-1].append(done)
        elif stack and t[0] == "str":
            stack[-1].append(t[1])
        elif stack and t[0] == "id" and (t[1] in consts):
            stack[-1].append(consts[t[1]])
    return [(f[0], f[1], f[2]) for f in out]


# --- llama.cpp's unicode_regex_split, on Python's re ------------------------------------------

CATEGORY_UNITS = {"N": 0xD1, "L": 0xD2, "P": 0xD3, "M": 0xD4, "S": 0xD5}
CATEGORY_ASCII = {
    "N": r"0-9",
    "L": r"A-Za-z",
    "P": r"!-#%-*,-/:-;?-@\[-\]_\{\}",
    "M": r"",
    "S": r"\$\+<-\>\^`\|",
}
CATEGORY_NAMES = {"N": "N", "L": "L", "P": "P", "M": "M", "S": "S", "Lu": "L", "Ll": "L", "Lt": "L", "Lm": "L", "Lo": "L"}
WHITESPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | set(
    range(0x2000, 0x200B)
)


def collapsed(pattern):
    return any("\\p{%s}" % n in pattern for n in CATEGORY_NAMES)


def collapse_pattern(p):
    out, inside, i = "", False, 0
    while i < len(p):
        c = p[i]
        if c == "[" and (i == 0 or p[i - 1] != "\\"):
            inside = True
        elif inside and c == "]" and p[i - 1] != "\\":
            inside = False
        m = re.match(r"\\p\{(\w+)\}", p[i:])
        if m and m.group(1) in CATEGORY_NAMES:
            cat = CATEGORY_NAMES[m.group(1)]
            body = chr(CATEGORY_UNITS[cat]) + CATEGORY_ASCII[cat]
            out += body if inside else "[" + body + "]"
            i += len(m.group(0))
            continue
        out += c
        i += 1
    return out


def units(cps, collapse):
    out = []
    for cp in cps:
        if cp < 0x80:
            out.append(cp)
        elif cp in WHITESPACE:
            out.append(0x0B)
        elif not collapse:
            out.append(cp)
        else:
            cat = unicodedata.category(chr(cp))[0]
            out.append(CATEGORY_UNITS.get(cat, 0xD0))
    return "".join(map(chr, out))


def regex_split(pattern, text_units, pieces):
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"  # ECMAScript's $ is the end only; Python's allows a final \n
    rx = re.compile(pattern, re.ASCII)
    out = []
    for b, e in pieces:
        s = text_units[b:e]
        last = at = 0

        def add(x, y):
            if y > x:
                out.append((b + x, b + y))

        while (m := rx.search(s, at)) is not None:
            add(last, m.start())
            add(m.start(), m.end())
            last = at = m.end()
            if m.start() != m.end():
                continue
            if m.end() == len(s):
                break
            m2 = rx.match(s, m.end())  # regex_iterator's non-empty retry at the same place
            if m2 is not None and m2.end() > m2.start():
                add(m2.start(), m2.end())
                last = at = m2.end()
            else:
                at = m.end() + 1
        add(last, len(s))
    return out


def split(patterns, text):
    cps = [ord(c) for c in text]
    pieces = [(0, len(cps))] if cps else []
    for p in patterns:
        c = collapsed(p)
        pieces = regex_split(collapse_pattern(p) if c else p, units(cps, c), pieces)
    return [text[b:e] for b, e in pieces]


# --- the cases ---------------------------------------------------------------------------------

TEXTS = [
    "Hello world, it's 2024! I'M here; we'LL see.",
    "1234567 12 3.14159 ½ ٣٤ x1y22z333",
    "中文测试 日本語のテスト 한국어 ไทย",
    "  lead\n\n\tmixed \r\n trail   ",
    "Ελληνικά Ωmega K\u212a µ \u00c5ngstr\u00f6m cafe\u0301 na\u00efve",
    "(a)[b]{c} <x>=y ~z `q` $5 #tag @me a/b\\c |p|",
    "CamelCaseWord HTTPServer iPhone ÉCOLE école",
    "<sentinel:12> IMGIMGABZ ok",
    "emoji 🦙🦙 and\u00a0nbsp\u3000ideographic\u2028line",
    "   4096 tokens\n\n\n    indented code:\n\tx = 1_000_000",
]


def c_escape(s):
    out, after_hex = "", False
    for b in s.encode():
        c = chr(b)
        if after_hex and c in "0123456789abcdefABCDEF":
            out += '""'  # a hex escape would swallow the digit
        after_hex = False
        if c == '"' or c == "\\":
            out += "\\" + c
        elif 0x20 <= b < 0x7F:
            out += c
        else:
            out += "\\x%02X" % b
            after_hex = True
    return '"' + out + '"'


def main():
    w = sys.stdout.write
    w("// GENERATED by scripts/gen_pretok_cases.py (Python's re as llama.cpp's std::regex); do not edit.\n")
    w("// {tokenizer.ggml.pre name, text, words}\n")
    for typ, names, patterns in families():
        if typ in ("kimi-k2", "afmoe"):
            continue
        for text in TEXTS:
            words = split(patterns, text)
            w("{%s, %s, {%s}},\n" % (c_escape(names[0]), c_escape(text), ", ".join(map(c_escape, words))))


if __name__ == "__main__":
    main()
