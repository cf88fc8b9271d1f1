// JSON Schema -> GBNF, with llama.cpp's json-schema-to-grammar semantics: the grammar derives
// exactly the JSON texts (compact, or with llama.cpp's bounded whitespace) that the schema accepts,
// for the part of JSON Schema it covers:
//   type (object, array, string, number, integer, boolean, null; a list of types), properties,
//   required (required properties first, in schema order; optional ones after, in order),
//   additionalProperties (false, true, a schema), enum, const, anyOf / oneOf (as anyOf), allOf of
//   objects (properties merged), items / prefixItems, minItems / maxItems, minLength / maxLength,
//   integer minimum / maximum / exclusiveMinimum / exclusiveMaximum, format date, time, date-time,
//   uuid, local $ref to #/definitions/... and #/$defs/....
// Anything else that constrains a value (pattern, a number's minimum, multipleOf, a remote $ref,
// uniqueItems, an unknown format or keyword ...) is an error naming the keyword and where it is
// (a JSON pointer), never silently ignored: output must always validate. Annotations (title,
// description, default, examples, $schema, $id, $comment, ...) are ignored.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <string_view>

namespace weft::model {

// Throws weft::Error("json_schema", "... at /pointer") for a schema it cannot enforce.
std::string json_schema_to_grammar(const nlohmann::ordered_json& schema);
// Same, from JSON text (a parse error is a weft::Error too).
std::string json_schema_to_grammar(const std::string& schema_json);

// A GBNF literal for UTF-8 text: quotes, backslashes and control characters escaped.
std::string gbnf_literal(std::string_view text);

// Several schemas in one grammar (a forced call's arguments, one schema per tool): each schema's
// rule has the name it is added under, and the rules they share are written once.
class JsonSchemaRules {
 public:
  // `name`: a GBNF rule name (letters, digits, '-') no other schema took. Throws as
  // json_schema_to_grammar does, leaving the rules as they were.
  void add(const std::string& name, const nlohmann::ordered_json& schema);
  std::string text() const;  // the GBNF rules

 private:
  std::map<std::string, std::string> rules_;
};

}  // namespace weft::model
