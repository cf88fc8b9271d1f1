// JSON Schema -> GBNF: for each feature, texts the grammar must and must not derive; parts that
// cannot be enforced are errors naming the keyword and where it is.
#include "model/json_schema_grammar.h"

#include "model/grammar.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::model {
namespace {

struct SchemaCase {
  const char* schema;
  std::vector<const char*> good, bad;
};

void check(const SchemaCase& c) {
  std::string gbnf = json_schema_to_grammar(std::string(c.schema));
  auto g = Grammar::parse(gbnf);
  for (const char* t : c.good) EXPECT_TRUE(grammar_matches(g, t)) << c.schema << " should match " << t << "\n" << gbnf;
  for (const char* t : c.bad)
    EXPECT_FALSE(grammar_matches(g, t)) << c.schema << " should not match " << t << "\n" << gbnf;
}

TEST(JsonSchemaGrammar, Primitives) {
  check({R"({"type":"string"})", {R"("")", R"("a b\n\"\u00e9")", "\"\xc3\xa9\""}, {"x", R"("a)", "\"\n\"", R"("\q")"}});
  check({R"({"type":"integer"})", {"0", "-12", "1234567890123456"}, {"01", "1.5", "-", "+1", "12345678901234567"}});
  check({R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "0x1"}});
  check({R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}});
  check({R"({"type":"null"})", {"null"}, {"nil", ""}});
  check({R"({"type":["integer","null"]})", {"5", "null"}, {"true", "\"5\""}});
  check({R"({})", {"1", R"({"a":[true,null]})", R"("s")"}, {"", "{"}});
  check({R"({"type":"object"})", {"{}", R"({"a": 1, "b": {"c": []}})"}, {"[]", "{a:1}"}});
}

TEST(JsonSchemaGrammar, ObjectsRequiredOptionalAdditional) {
  const char* s =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                      "required":["b"],"additionalProperties":false})";
  check({s,
         {R"({"b":"x"})", R"({"b":"x","a":1})", R"({"b":"x","a":1,"c":true})", R"({"b":"x","c":false})",
          R"({ "b" : "x" , "a" : 2 })"},
         {R"({})", R"({"a":1})", R"({"b":"x","d":1})", R"({"b":1})", R"({"b":"x","c":true,"a":1})"}});
  const char* extra =
      R"({"properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string"}})";
  check({extra,
         {R"({"id":1})", R"({"id":1,"name":"x","idx":"y","i":"z"})", R"({"id":1,"":"e"})"},
         {R"({"id":1,"id":"x"})", R"({"id":1,"name":2})"}});
  check({R"({"additionalProperties":true,"properties":{"k":{"const":1}}})",
         {R"({})", R"({"k":1,"z":[1]})"},
         {R"({"k":2})"}});
}

TEST(JsonSchemaGrammar, EnumConstAnyOfAllOf) {
  check({R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")", "4"}});
  check({R"({"const":{"a":[1,"x"]}})", {R"({"a":[1,"x"]})"}, {R"({"a":[1]})"}});
  check({R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"7", R"("ab")"}, {R"("abc")", "true"}});
  check({R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"}});
  check({R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"null"}}}]})",
         {R"({"a":1})", R"({"a":1,"b":null})"},
         {R"({"b":null})"}});
}

TEST(JsonSchemaGrammar, ArraysAndLengths) {
  check({R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
         {"[1]", "[1, 2,3]"},
         {"[]", "[1,2,3,4]", "[1,]", R"(["a"])"}});
  check({R"({"type":"array","items":{"type":"boolean"}})", {"[]", "[true,false,true]"}, {"[1]"}});
  check({R"({"type":"array","minItems":2})", {"[1,\"a\"]"}, {"[1]"}});
  check({R"({"prefixItems":[{"type":"integer"},{"type":"string"}]})", {R"([1,"a"])"}, {R"([1])", R"(["a",1])"}});
  check({R"({"type":"string","minLength":2,"maxLength":3})",
         {R"("ab")", R"("a\nb")", "\"\xc3\xa9\xc3\xa9\""},
         {R"("a")", R"("abcd")"}});
}

TEST(JsonSchemaGrammar, IntegerRanges) {
  check({R"({"type":"integer","minimum":-5,"maximum":123})",
         {"-5", "-1", "0", "9", "10", "99", "100", "123"},
         {"-6", "124", "200", "1000", "-0"}});
  check({R"({"type":"integer","minimum":37})", {"37", "99", "100", "123456"}, {"36", "5", "-37"}});
  check({R"({"type":"integer","exclusiveMinimum":0})", {"1", "10"}, {"0", "-1"}});
  check({R"({"type":"integer","maximum":-3})", {"-3", "-10", "-1000"}, {"-2", "0", "5"}});
  check({R"({"type":"integer","maximum":20})", {"20", "0", "-1000"}, {"21", "100"}});
  check({R"({"type":"integer","minimum":-20})", {"-20", "-1", "0", "50000"}, {"-21", "-100"}});
  check({R"({"type":"integer","minimum":150,"exclusiveMaximum":1000})", {"150", "999", "500"}, {"149", "1000", "99"}});
}

TEST(JsonSchemaGrammar, Formats) {
  check({R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}});
  check({R"({"type":"string","format":"time"})", {R"("23:59:59Z")", R"("01:02:03.456+05:30")"}, {R"("24:00:00Z")"}});
  check({R"({"type":"string","format":"date-time"})", {R"("2024-01-02T03:04:05Z")"}, {R"("2024-01-02 03:04:05Z")"}});
  check({R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}});
}

TEST(JsonSchemaGrammar, LocalRefsAndRecursion) {
  const char* s = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                     "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},
                     "$ref":"#/$defs/node"})";
  check({s, {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"}, {R"({"v":1})"}});
  check({R"({"definitions":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/definitions/n"}})",
         {"[1,2]"},
         {R"(["x"])"}});
}

TEST(JsonSchemaGrammar, UnenforceablePartsAreErrorsNamingThem) {
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"string","pattern":"^a+$"})")),
               "keyword 'pattern' is not supported at /pattern");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"properties":{"x":{"$ref":"http://e.com/s.json"}}})")),
               "is not local");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"properties":{"x":{"$ref":"#/$defs/missing"}}})")),
               "names nothing");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"number","minimum":0})")),
               "'minimum' is enforced only for type integer at /minimum");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"string","format":"email"})")),
               "format 'email' is not supported (date");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})")),
               "'uniqueItems' is not supported");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"widget"})")), "unknown type 'widget' at /type");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"properties":{"a":{"type":"integer","maximum":1.5}}})")),
               "at /properties/a/maximum");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"string","maxLength":100000})")), "maxLength");
  EXPECT_ERROR(json_schema_to_grammar(std::string(R"({"type":"integer","minimum":5,"maximum":4})")), "no integer");
  EXPECT_ERROR(json_schema_to_grammar(std::string("{not json")), "schema is not JSON");
  std::string deep = "{}";
  for (int i = 0; i < 200; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_ERROR(json_schema_to_grammar(deep), "nested deeper than 64");
}

}  // namespace
}  // namespace weft::model
