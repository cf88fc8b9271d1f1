// Real models' chat templates (tests/data/chat_templates/, see SOURCES.txt) rendered by weft's
// Jinja engine against what Python's jinja2 renders in transformers' environment
// (goldens.json, written by scripts/make_chat_template_goldens.py): byte for byte, and a template
// that raises in jinja2 (gemma-2 refusing a system message) raises here too. Where jinja2 fails
// on a Python type (tojson of the generator `map` returns; weft's map returns a list) either
// outcome passes, as long as nothing crashes.
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"
#include "core/error.h"

#include "support/chat_template_files.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace weft::chat {
namespace {

struct Goldens {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(weft::test_support::chat_template_file("goldens.json"));
  std::tm now() const {
    std::tm t{};
    const auto& n = json["now"];
    t.tm_year = n[0].get<int>() - 1900;
    t.tm_mon = n[1].get<int>() - 1;
    t.tm_mday = n[2].get<int>();
    t.tm_hour = n[3].get<int>();
    t.tm_min = n[4].get<int>();
    t.tm_sec = n[5].get<int>();
    std::time_t tt = timegm(&t);  // fills in the day of the week and year
    gmtime_r(&tt, &t);
    return t;
  }
};

ChatContext context_of(const nlohmann::ordered_json& r) {
  ChatContext c;
  c.messages = jinja::from_json(r["messages"]);
  if (r.contains("tools")) c.tools = jinja::from_json(r["tools"]);
  c.add_generation_prompt = r["add_generation_prompt"].get<bool>();
  c.bos_token = r["bos_token"].get<std::string>();
  c.eos_token = r["eos_token"].get<std::string>();
  return c;
}

TEST(JinjaGolden, RealTemplatesRenderAsJinja2Does) {
  const Goldens g;
  JinjaRenderOptions o;
  o.now = g.now();
  std::map<std::string, JinjaTemplate> templates;
  std::set<std::string> failed;
  int n_checked = 0;
  for (const auto& r : g.json["renders"]) {
    const std::string name = r["template"].get<std::string>();
    const std::string label = name + " / " + r["case"].get<std::string>();
    auto it = templates.find(name);
    if (it == templates.end())
      it = templates.emplace(name, JinjaTemplate(weft::test_support::chat_template_file(name + ".jinja"))).first;
    const ChatContext c = context_of(r);
    if (r.contains("expected")) {
      std::string got;
      try {
        got = it->second.render_chat(c, o);
      } catch (const Error& e) {
        ADD_FAILURE() << label << ": " << e.what();
        failed.insert(name);
        continue;
      }
      EXPECT_EQ(got, r["expected"].get<std::string>()) << label;
      if (got != r["expected"].get<std::string>()) failed.insert(name);
    } else if (r.contains("raises")) {
      try {
        it->second.render_chat(c, o);
        ADD_FAILURE() << label << ": rendered, but jinja2 raises";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(r["raises"].get<std::string>()), std::string::npos) << e.what();
      }
    } else {
      try {
        it->second.render_chat(c, o);
      } catch (const Error&) {
      }
    }
    ++n_checked;
  }
  EXPECT_GE(n_checked, 380);
  EXPECT_GE(templates.size(), 55u);
  for (const auto& f : failed) ADD_FAILURE() << "differs from jinja2: " << f;
}

}  // namespace
}  // namespace weft::chat
