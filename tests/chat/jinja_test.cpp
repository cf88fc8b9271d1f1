// The Jinja engine construct by construct: literals, operators, access, filters, tests,
// statements and whitespace control, each expected string what Python's jinja2 3.1 renders in
// transformers' environment (checked when written); then errors with their positions and hostile
// templates, which must end in a weft::Error within the limits, never a crash or a hang.
#include "chat/chat_template.h"
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <chrono>

namespace weft::chat {
namespace {

// The variables every case renders with.
const char* kContext = R"({
  "msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": " ok "}],
  "d": {"b": 2, "a": 1, "C": 3}, "s": "  Hello World  ", "n": null, "xs": [3, 1, 2], "u": "héllo wörld"})";

JinjaRenderOptions fixed_time() {
  JinjaRenderOptions o;
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 14;
  t.tm_hour = 9;
  t.tm_min = 26;
  t.tm_sec = 53;
  t.tm_wday = 5;
  t.tm_yday = 72;
  o.now = t;
  return o;
}

std::string render(std::string_view source, const JinjaRenderOptions& o = fixed_time()) {
  static const jinja::Value context = jinja::from_json(nlohmann::ordered_json::parse(kContext));
  return JinjaTemplate(source).render(context.dict(), o);
}

struct Case {
  const char* source;
  const char* expected;
};

void expect_all(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    try {
      EXPECT_EQ(render(c.source), c.expected) << c.source;
    } catch (const Error& e) {
      ADD_FAILURE() << c.source << ": " << e.what();
    }
  }
}

TEST(Jinja, Literals) {
  // clang-format off
  expect_all({
    {"{{ 'a\\tb\\n' }}{{ \"q\\\"\" }}{{ '\\u00e9\\x41' }}", "a\tb\nq\"éA"},
    {"{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 2.0 }} {{ 1e3 }} {{ 1_000 }}", "1 -2 1.5 2.0 1000.0 1000"},
    {"{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", "True True False None None"},
    {"{{ [1, 'a', none, true] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'k': [1, 2.5]} }}", "[1, 'a', None, True] (1,) (1, 2) () {'k': [1, 2.5]}"},
    {"{{ 'it\\'s' }} {{ ['it\\'s'] }} {{ 'a' 'b' }}", "it's [\"it's\"] ab"},
  });
  // clang-format on
}

TEST(Jinja, Operators) {
  // clang-format off
  expect_all({
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }}", "7 9 3 -4 1 2 3.5 1024 64"},
    {"{{ 1 + 1.5 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [0] * 3 }} {{ [1] + [2] }} {{ 'x' + 'y' }}", "2.5 a1None ababab [0, 0, 0] [1, 2] xy"},
    {"{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }}", "True True True True False True True"},
    {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'a' in d }} {{ 'z' not in d }} {{ not 1 in [2] }}", "True True True True True"},
    {"{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }} {{ '' and 1 }}", "x y [] True "},
    {"{{ 'yes' if xs else 'no' }} {{ 'yes' if n else 'no' }} [{{ 'x' if false }}]", "yes no []"},
    {"{{ -xs[0] }} {{ +1 }} {{ - 2 ** 2 }}", "-3 1 4"},
    {"{{ (-1) ** 3 }} {{ (-1) ** 1000000000001 }} {{ 0 ** 0 }} {{ 3 ** 39 }}", "-1 -1 1 4052555153018976267"},
  });
  // clang-format on
}

TEST(Jinja, AttributesItemsSlicesAndMethods) {
  // clang-format off
  expect_all({
    {"{{ msgs[1].role }} {{ msgs[1]['content'] }} {{ msgs[-1].content }} {{ msgs.0.role }} [{{ msgs[9] }}] [{{ d.nope }}]", "user Hi  ok  system [] []"},
    {"{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ u[1:3] }} {{ u[::-1] }}", "[1, 2] [3, 1] [2, 1, 3] [3, 2] bcd ef él dlröw olléh"},
    {"{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z', 9) }} {{ d.get('z') }}", "[('b', 2), ('a', 1), ('C', 3)] ['b', 'a', 'C'] [2, 1, 3] 1 9 None"},
    {"{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}", "Hello World|Hello World  |  Hello World|hi"},
    {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}", "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a,b', 'c']"},
    {"{{ s.startswith('  He') }} {{ s.endswith(('x', '  ')) }} {{ 'aXbX'.replace('X', '-') }} {{ 'aXbX'.replace('X', '-', 1) }}", "True True a-b- a-bX"},
    {"{{ 'hello world'.title() }} {{ 'HeLLo'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hELLO'.capitalize() }} {{ 'banana'.count('an') }} {{ 'banana'.find('n') }} {{ 'banana'.rfind('n') }} {{ 'banana'.find('z') }}", "Hello World HELLO hello Hello 2 2 4 -1"},
    {"{{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'b') }} {{ '{x}!'.format(x=2) }} {{ xs.index(1) }} {{ xs.count(3) }}", "a-b 1 and b 2! 1 1"},
  });
  // clang-format on
}

TEST(Jinja, Filters) {
  // clang-format off
  expect_all({
    {"{{ s | trim }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello world-foo' | title }}|{{ 'hELLO wORLD' | capitalize }}", "Hello World|  HELLO WORLD  |  hello world  |Hello World-Foo|Hello world"},
    {"{{ xs | length }} {{ 'héllo' | length }} {{ d | length }} {{ xs | count }} {{ xs | first }} {{ xs | last }} {{ xs | join(', ') }} {{ xs | join }}", "3 5 3 3 3 2 3, 1, 2 312"},
    {"{{ n | default('dflt') }} {{ undefined_name | default('dflt') }} {{ '' | default('e', true) }} {{ 0 | d(5) }}", "None dflt e 0"},
    {"{{ 'a-b' | replace('-', '+') }} {{ 42 | string }} {{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ 3 | float }}", "a+b 42 43 4 0 2.5 3.0"},
    {"{{ xs | sort }} {{ xs | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ xs | reverse | list }} {{ 'abc' | reverse }} {{ [1, 2, 1, 3] | unique | list }}", "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] [2, 1, 3] cba [1, 2, 3]"},
    {"{{ d | dictsort }} {{ d | items | list }} {{ d | list }} {{ 'ab' | list }}", "[('a', 1), ('b', 2), ('C', 3)] [('b', 2), ('a', 1), ('C', 3)] ['b', 'a', 'C'] ['a', 'b']"},
    {"{{ msgs | map(attribute='role') | list }} {{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join }} {{ msgs | rejectattr('role', 'eq', 'system') | list | length }}", "['system', 'user', 'assistant'] Hi 2"},
    {"{{ n | map(attribute='x') | list }}{{ n | selectattr('x') | list }}", "[][]"},
    {"{{ xs | select('odd') | list }} {{ xs | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ ['a', 'B'] | map('upper') | list }}", "[3, 1] [2] [1, 'a'] ['A', 'B']"},
    {"{{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ xs | sum }} {{ xs | max }} {{ xs | min }}", "3 2.57 2.0 3.0 6 3 1"},
    {"{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'ab' | center(6) }}|{{ 'one two  three' | wordcount }}", "a\n  b\n\n  c|  a\n  b|  ab  |3"},
    {"{{ '<a href=\"x\">&</a>' | e }} {{ '<b>' | safe }} {{ '%s is %d' | format('x', 3) }} {{ '%05.1f|%-4s|' | format(3.14159, 'ab') }}", "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt; <b> x is 3 003.1|ab  |"},
    {"{{ d | tojson }} {{ msgs[1] | tojson }} {{ [1, 2.0, 'é', none, true] | tojson }} {{ 'a\"b\\\\c\\n' | tojson }}", "{\"b\": 2, \"a\": 1, \"C\": 3} {\"role\": \"user\", \"content\": \"Hi\"} [1, 2.0, \"é\", null, true] \"a\\\"b\\\\c\\n\""},
    {"{{ d | tojson(indent=2) }}|{{ {'a': [], 'b': {}} | tojson(indent=2) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}", "{\n  \"b\": 2,\n  \"a\": 1,\n  \"C\": 3\n}|{\n  \"a\": [],\n  \"b\": {}\n}|{\"b\":2,\"a\":1,\"C\":3}|{\"C\": 3, \"a\": 1, \"b\": 2}|\"\\u00e9\""},
    {"{% filter upper %}up {{ s | trim }}{% endfilter %}", "UP HELLO WORLD"},
    // markupsafe: plain text added to markup is escaped (functionary v3.1's template relies on it)
    {"{{ 'a'|safe + '<b>' }}|{{ '<b>' + 'x'|safe }}|{{ ('<i>'|e) + '&' }}|{{ '<i>'|e|e }}|{{ '<i>'|e|forceescape }}|{{ 'a'|safe ~ '<b>' }}", "a&lt;b&gt;|&lt;b&gt;x|&lt;i&gt;&amp;|&lt;i&gt;|&amp;lt;i&amp;gt;|a<b>"},
  });
  // clang-format on
}

TEST(Jinja, Tests) {
  // clang-format off
  expect_all({
    {"{{ n is none }} {{ n is not none }} {{ nope is defined }} {{ nope is undefined }} {{ xs is defined }}", "True False False True True"},
    {"{{ s is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ 1.0 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 1 is boolean }}", "True True True True True False True True False"},
    {"{{ d is mapping }} {{ xs is mapping }} {{ xs is iterable }} {{ s is iterable }} {{ 1 is iterable }} {{ xs is sequence }} {{ d is sequence }} {{ s is sequence }}", "True False True True False True True True"},
    {"{{ 2 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 1 is equalto(2) }} {{ 2 is gt 1 }} {{ 2 is lt(1) }} {{ 1 is in [1] }}", "True True True False True False True False True"},
    {"{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }}", "True False True True True True"},
  });
  // clang-format on
}

TEST(Jinja, Statements) {
  // clang-format off
  expect_all({
    {"{% if n %}a{% elif xs %}b{% else %}c{% endif %}{% if not xs %}d{% else %}e{% endif %}", "be"},
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"{% for x in xs %}{{ loop.previtem | default('-') }}{{ x }}{{ loop.nextitem | default('-') }} {% endfor %}", "-31 312 12- "},
    {"{% for x in [] %}x{% else %}empty{% endfor %} {% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", "empty 3222"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %} {% for (a, b) in [(1, 2)] %}{{ a + b }}{% endfor %} {% for k in d %}{{ k }}{% endfor %}", "b=2,a=1,C=3, 3 baC"},
    {"{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "3"},
    {"{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %} {% for c in 'héy' %}[{{ c }}]{% endfor %}", "aba [h][é][y]"},
    {"{% for i in range(3) %}{{ i }}{% endfor %} {% for i in range(1, 7, 2) %}{{ i }}{% endfor %} {% for i in range(3, 0, -1) %}{{ i }}{% endfor %}", "012 135 321"},
    {"{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }} {% set t = 1, 2 %}{{ t }}", "123 (1, 2)"},
    {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", "231"},
    {"{% set ns = namespace(total=0, items=[]) %}{% for i in xs %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}", "6"},
    {"{% set block %}  inner {{ xs | length }}  {% endset %}[{{ block }}] {% set t | trim | upper %}  shout  {% endset %}[{{ t }}]", "[  inner 3  ] [SHOUT]"},
    {"{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}", "Hello A! Hello B? Hello C."},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", "120"},
    {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ xs[0] }}{% endcall %}", "<b>bold 3</b>"},
    {"{% macro rows() %}{% for i in [1, 2] %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(i) rows() %}[{{ i }}]{% endcall %}", "[1][2]"},
    {"{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ strftime_now('%Y-%m-%d %H:%M %b %d') }}", "{'a': 1, 'b': 'x'} 1 2025-03-14 09:26 Mar 14"},
    {"{# a comment #}a{#- trimmed -#}  b {{- ' c ' -}}  d", "ab c d"},
    {"{% raw %}{{ not parsed }}{% endraw %}", "{{ not parsed }}"},
  });
  // clang-format on
}

TEST(Jinja, WhitespaceControlAsTransformersSetsIt) {
  // clang-format off
  expect_all({
    {"{% if true %}\nline\n{% endif %}\nafter", "line\nafter"},
    {"  {% if true %}\n  indented\n  {% endif %}\n  end", "  indented\n  end"},
    {"{% for x in xs %}\n  {{ x }}\n{% endfor %}\n", "  3\n  1\n  2\n"},
    {"a\n  {%- if true %}\n b {% endif -%}\n  c", "a b c"},
    {"a  {%+ if true %}b{% endif %}", "a  b"},
    {"{{ 'x' }}\n{{ 'y' }}\n", "x\ny"},
    {"x {# c #}\ny\n  {# c2 #}\nz", "x y\nz"},
    // a line whose newline trim_blocks took still starts a line for lstrip_blocks (GLM-4.6's template)
    {"{% if true %}\n    {% set x = 1 %}a\n{%- endif %}\n  {% if true %}b{% endif %}", "ab"},
  });
  // clang-format on
}

// Jinja2's default Undefined: empty and false when printed or tested, an error when used.
TEST(Jinja, UndefinedBehavesAsJinja2Default) {
  EXPECT_EQ(render("[{{ nope }}][{{ nope | length }}][{% for x in nope %}x{% endfor %}][{{ 'y' if nope else 'n' }}]"),
            "[][0][][n]");
  EXPECT_EQ(render("{{ msgs[1].tool_calls is defined }} {{ n.attr is defined }} {{ nope ~ 'x' }}"), "False False x");
  EXPECT_ERROR(render("{{ nope.attr }}"), "line 1, column 8: 'nope' is undefined");
  EXPECT_ERROR(render("{{ nope + 1 }}"), "'nope' is undefined");
  EXPECT_ERROR(render("{{ nope() }}"), "'nope' is undefined");
  EXPECT_ERROR(render("{{ msgs[1].tool_calls[0] }}"), "has no attribute 'tool_calls'");
}

TEST(Jinja, ErrorsNameTheLineAndColumn) {
  EXPECT_ERROR(render("a\n{% if %}"), "line 2, column 7: expected an expression");
  EXPECT_ERROR(render("{% for x in xs %}"), "missing '{% endfor %}'");
  EXPECT_ERROR(render("{% if true %}{% endfor %}"), "line 1, column 17: unexpected '{% endfor %}'");
  EXPECT_ERROR(render("{{ 'abc }}"), "line 1, column 4: unclosed string literal");
  EXPECT_ERROR(render("x {{ 1 + "), "unclosed {{");
  EXPECT_ERROR(render("{# never closed"), "line 1, column 1: unclosed comment");
  EXPECT_ERROR(render("{% include 'x.jinja' %}"), "unknown or unsupported tag 'include'");
  EXPECT_ERROR(render("{{ 1 ? 2 }}"), "unexpected character '?'");
  EXPECT_ERROR(render("{{ xs | nosuchfilter }}"), "no filter named 'nosuchfilter'");
  EXPECT_ERROR(render("{{ xs is nosuchtest }}"), "no test named 'nosuchtest'");
  EXPECT_ERROR(render("line one\n  {{ 'a' + 1 }}"), "line 2, column 10: unsupported operand types for +");
  EXPECT_ERROR(render("{{ 1 // 0 }}"), "division or modulo by zero");
  EXPECT_ERROR(render("{{ 9223372036854775807 + 1 }}"), "integer overflow");
  EXPECT_ERROR(render("{{ 2 ** 63 }}"), "integer overflow");
  EXPECT_ERROR(render("{{ raise_exception('roles must alternate') }}"),
               "line 1, column 19: the template raised an exception: roles must alternate");
  EXPECT_ERROR(render("{% set a, b = [1, 2, 3] %}"), "cannot unpack 3 values into 2 names");
  EXPECT_ERROR(render("{% set x = 1 %}{% set x.y = 2 %}"), "'x' is not a namespace()");
  EXPECT_ERROR(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "takes 1 arguments, given 2");
  EXPECT_ERROR(render("{{ n | tojson }}{{ nope | tojson }}"), "not JSON serializable");
  EXPECT_ERROR(render("{{ 1 < 'a' }}"), "cannot order integer and string");
  EXPECT_ERROR(render("{% for x in 5 %}{% endfor %}"), "'integer' is not iterable");
}

// A template from an untrusted file must end in an error, quickly, whatever it does.
TEST(Jinja, HostileTemplatesAreBounded) {
  JinjaRenderOptions small = fixed_time();
  small.limits.max_steps = 2'000'000;
  small.limits.max_output_bytes = 1 << 16;
  small.limits.max_string_bytes = 1 << 16;
  const auto t0 = std::chrono::steady_clock::now();
  // Loops that would run for ever or build huge lists.
  EXPECT_ERROR(render("{% for i in range(1000000000) %}{% endfor %}", small), "too large");
  EXPECT_ERROR(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small),
               "steps");
  // Output and strings that grow without bound.
  EXPECT_ERROR(render("{% for i in range(2000) %}{{ 'x' * 1000 }}{% endfor %}", small), "exceed");
  EXPECT_ERROR(render("{{ 'x' * 100000000000 }}", small), "too large");
  EXPECT_ERROR(
      render("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", small),
      "exceed");
  EXPECT_ERROR(render("{{ [1] * 100000000000 }}", small), "too large");
  // Nothing repeated many times is nothing, at once (the fuzzer's hang).
  EXPECT_EQ(render("{{ '' * 5282753637903004103 }}|{{ ([] * 5282753637903004103) | length }}", small), "|0");
  // Recursion: macros calling themselves, and nesting the parser would recurse on.
  EXPECT_ERROR(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", small), "deeper than 64");
  EXPECT_ERROR(render("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", small),
               "nests deeper");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_ERROR(render(ifs, small), "nests deeper");
  EXPECT_ERROR(render("{{ -" + std::string(100000, '-') + "1 }}", small), "nests deeper");
  // A namespace that holds itself: printing it or serialising it must not recurse for ever.
  EXPECT_ERROR(render("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me | tojson }}", small),
               "not JSON serializable");
  // Values built by doubling: a list holding the last one twice, 40 times over, is 2^40 leaves to
  // walk; comparing, printing or serialising it counts its nodes against the steps.
  const std::string doubled =
      "{% set ns = namespace(a=[], b=[]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}"
      "{% set ns.b = [ns.b, ns.b] %}{% endfor %}";
  EXPECT_ERROR(render(doubled + "{{ ns.a | tojson }}", small), "steps");
  EXPECT_ERROR(render(doubled + "{{ ns.a }}", small), "steps");
  EXPECT_ERROR(render(doubled + "{{ ns.a == ns.b }}", small), "steps");
  EXPECT_EQ(render(doubled + "{{ ns.a == ns.a }}", small), "True");  // one list: equal without a walk
  // Long lists and strings split into many pieces.
  EXPECT_ERROR(render("{{ range(2000000) | length }}"), "too large");
  EXPECT_ERROR(render("{{ ('a,' * 2000000).split(',') | length }}"), "too large");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Jinja, RendersManyTimesFromOneParse) {
  const JinjaTemplate t("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
  ChatContext c;
  std::vector<Message> chat = {{"user", "a"}, {"assistant", "b"}};
  c.messages = messages_value(chat);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.render_chat(c), "<user>a<assistant>b");
}

}  // namespace
}  // namespace weft::chat
