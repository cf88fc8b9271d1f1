#include "serve/output_constraint.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "serve/http_error.h"
#include "serve/request.h"

#include <string>

namespace weft::serve {

namespace {

// A schema's grammar; `where` names the field in a 400.
std::shared_ptr<const model::Grammar> schema_grammar(const BodyJson& schema, const std::string& where) {
  if (!schema.is_object()) reject(400, "'{}' must be an object (a JSON schema), got {}", where, schema.type_name());
  try {
    return model::Grammar::parse(model::json_schema_to_grammar(schema));
  } catch (const Error& e) {
    reject(400, "'{}': {}", where, e.message());
  }
}

std::shared_ptr<const model::Grammar> response_format(const BodyJson& rf) {
  if (!rf.is_object()) reject(400, "'response_format' must be an object, got {}", rf.type_name());
  const BodyJson& type = field(rf, "type");
  if (!type.is_string()) reject(400, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type.get<std::string>();
  if (t == "text") return nullptr;
  if (t == "json_object") {  // any object; llama-server also takes a schema beside it
    const BodyJson& schema = field(rf, "schema");
    return schema_grammar(schema.is_null() ? BodyJson{{"type", "object"}} : schema, "response_format.schema");
  }
  if (t == "json_schema") {
    const BodyJson& js = field(rf, "json_schema");
    if (!js.is_object()) reject(400, "'response_format.json_schema' must be an object holding 'schema'");
    const BodyJson& schema = field(js, "schema");
    if (schema.is_null()) reject(400, "'response_format.json_schema.schema' is missing");
    return schema_grammar(schema, "response_format.json_schema.schema");
  }
  reject(400, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"{}\"", t);
}

}  // namespace

std::shared_ptr<const model::Grammar> parse_output_constraint(const BodyJson& body) {
  const BodyJson& rf = field(body, "response_format");
  const BodyJson& schema = field(body, "json_schema");
  const BodyJson& grammar = field(body, "grammar");
  if (!rf.is_null() + !schema.is_null() + !grammar.is_null() > 1)
    reject(400, "'response_format', 'json_schema' and 'grammar' each constrain the reply: send one of them");
  if (!rf.is_null()) return response_format(rf);
  if (!schema.is_null()) return schema_grammar(schema, "json_schema");
  if (grammar.is_null()) return nullptr;
  if (!grammar.is_string()) reject(400, "'grammar' must be a string (GBNF), got {}", grammar.type_name());
  try {
    return model::Grammar::parse(grammar.get<std::string>());
  } catch (const Error& e) {
    reject(400, "'grammar': {}", e.message());
  }
}

}  // namespace weft::serve
