#include "apps/weft/llama_args.h"

#include "chat/chat_template.h"
#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace weft::cli {
namespace {

// llama.cpp's single-dash names of more than one letter (common/arg.cpp), each with the long
// name it stands for. A subcommand accepts the ones whose long name it has.
constexpr std::pair<std::string_view, std::string_view> kLlamaShortNames[] = {
    {"-cnv", "--conversation"},
    {"-no-cnv", "--no-conversation"},
    {"-sys", "--system-prompt"},
    {"-sysf", "--system-prompt-file"},
    {"-st", "--single-turn"},
    {"-co", "--color"},
    {"-ngl", "--n-gpu-layers"},
    {"-mg", "--main-gpu"},
    {"-fa", "--flash-attn"},
    {"-sm", "--split-mode"},
    {"-ts", "--tensor-split"},
    {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"},
    {"-np", "--parallel"},
    {"-ctxcp", "--ctx-checkpoints"},
    {"-cb", "--cont-batching"},
    {"-nocb", "--no-cont-batching"},
    {"-to", "--timeout"},
    {"-tb", "--threads-batch"},
    {"-ub", "--ubatch-size"},
    {"-dev", "--device"},
    {"-nkvo", "--no-kv-offload"},
    {"-lv", "--verbosity"},
    // llama-bench and llama-batched-bench
    {"-npp", "--npp"},
    {"-ntg", "--ntg"},
    {"-npl", "--npl"},
    {"-pg", "--pg"},
    {"-mmp", "--mmp"},
};

bool is_number(const std::string& s) {
  // "-1", "-0.5": values (llama.cpp's -n -1), never flags.
  size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  bool digit = false;
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i])))
      digit = true;
    else if (s[i] != '.' && s[i] != 'e' && s[i] != 'E')
      return false;
  }
  return digit;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

// Every flag `sub` accepts, as written on a command line (-m, --model, -cnv ...).
std::vector<std::string> known_flags(const CLI::App& sub) {
  std::vector<std::string> out;
  for (const CLI::Option* o : sub.get_options()) {
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  }
  for (const auto& [shortname, longname] : kLlamaShortNames)
    if (sub.get_option_no_throw(std::string(longname))) out.emplace_back(shortname);
  return out;
}

[[noreturn]] void unknown_flag(const CLI::App& sub, const std::string& flag) {
  const std::string near = closest_flag(flag, known_flags(sub));
  fail("cli", "unknown flag '{}' for 'weft {}'{}", flag, sub.get_name(),
       near.empty() ? std::string() : fmt::format("; did you mean '{}'?", near));
}

}  // namespace

std::string closest_flag(const std::string& flag, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& n : names) {
    const size_t d = edit_distance(flag, n);
    if (d < best_d) best_d = d, best = n;
  }
  return best;
}

std::vector<std::string> normalize_llama_args(const CLI::App& app, std::vector<std::string> args) {
  size_t i = 0;
  const CLI::App* sub = nullptr;
  for (; i < args.size() && !sub; ++i) sub = find_subcommand(app, args[i]);
  if (!sub) return args;  // no subcommand: CLI11 says what is missing
  std::vector<std::string> out(args.begin(), args.begin() + static_cast<ptrdiff_t>(i));
  for (; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--") {  // the rest is positional
      out.insert(out.end(), args.begin() + static_cast<ptrdiff_t>(i), args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-' || is_number(a)) {
      out.push_back(std::move(a));
      continue;
    }
    for (const auto& [shortname, longname] : kLlamaShortNames)
      if (a == shortname && sub->get_option_no_throw(std::string(longname))) a = longname;
    const std::string name = a.substr(0, a.find('='));
    const CLI::Option* opt = sub->get_option_no_throw(name);
    // -x is CLI11's own short form; -xyz (not a llama.cpp name) would be read as -x yz.
    if (!opt && name != "-h" && name != "--help") unknown_flag(*sub, name);
    const bool has_value = name.size() < a.size();
    if (opt && !has_value && i + 1 < args.size()) {
      const std::string& next = args[i + 1];
      const bool required = opt->get_items_expected_min() > 0;
      const bool optional = !required && opt->get_type_size_max() > 0 && opt->get_expected_max() >= 1;
      if (required || (optional && !next.empty() && next[0] != '-')) {
        // Value and flag as one "--long=value" word, so a value starting with '-' stays a value.
        // CLI11 reads "--long=" as no value and takes the next word: an empty value stays a word of
        // its own, which it reads as the empty string.
        if (opt->get_lnames().empty() || next.empty()) {
          out.push_back(std::move(a));
          out.push_back(next);
        } else {
          out.push_back("--" + opt->get_lnames()[0] + "=" + next);
        }
        ++i;
        continue;
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

CLI::Validator number_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return fmt::format("'{}' is not a number", text);
        if (!(v >= lo && v <= hi)) return fmt::format("{} is not a number in [{:g} - {:g}]", text, lo, hi);
        return std::string();
      },
      fmt::format("NUMBER in [{:g} - {:g}]", lo, hi));
}

CLI::Option* add_chat_template_kwargs(CLI::App& cmd, std::string& json_text) {
  return cmd
      .add_option("--chat-template-kwargs", json_text,
                  "a JSON object of extra chat template variables, e.g. '{\"enable_thinking\": false}'")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              chat::parse_template_kwargs(text);
              return std::string();
            } catch (const Error& e) {
              return e.message();
            }
          },
          "JSON"));
}

std::string process_escapes(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'x':
        if (i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2])) {
          out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default: out += '\\'; out += c;
    }
  }
  return out;
}

}  // namespace weft::cli
