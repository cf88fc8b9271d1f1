// llama.cpp's command-line conventions, on top of CLI11: its single-dash names of several
// letters (-cnv, -ngl, -sys, ...), unknown flags reported as such with the closest known one,
// and the escapes it processes in prompts.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace weft::cli {

// Rewrites llama.cpp's multi-letter single-dash flags to the long names the chosen subcommand
// has (CLI11 would read "-cnv" as "-c nv" and "-ngl 99" as "-n gl"), and throws
// weft::Error("cli") for a flag that subcommand does not have, naming the closest one it does.
// args: argv without the program name.
std::vector<std::string> normalize_llama_args(const CLI::App& app, std::vector<std::string> args);

// llama.cpp's string_process_escapes: \n \r \t \' \" \\ and \xNN (two hex digits); any other
// backslash pair is kept as written.
std::string process_escapes(const std::string& s);

// CLI::Range for a real number that also refuses NaN (which compares false with every bound, so
// CLI::Range lets it through).
CLI::Validator number_range(double lo, double hi);

// llama.cpp's --chat-template-kwargs JSON (variables of every Jinja render), checked as CLI11
// reads it (chat::parse_template_kwargs): a bad value ends the command before the model loads.
CLI::Option* add_chat_template_kwargs(CLI::App& cmd, std::string& json_text);

// The flag of `names` closest to `flag` by edit distance ("" when names is empty).
std::string closest_flag(const std::string& flag, const std::vector<std::string>& names);

}  // namespace weft::cli
