// weft: tensor-parallel LLM inference across any mix of devices.
#include "apps/weft/commands.h"
#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"weft: run one GGUF model on many devices at once with tensor parallelism"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "weft 0.1.0");
  using Add = weft::cli::Action (*)(CLI::App&);
  std::vector<std::pair<CLI::App*, weft::cli::Action>> actions;
  for (Add add : {weft::cli::add_run, weft::cli::add_bench, weft::cli::add_batched_bench, weft::cli::add_perplexity,
                  weft::cli::add_plan, weft::cli::add_info, weft::cli::add_tokenize, weft::cli::add_gen_model,
                  weft::cli::add_worker}) {
    const size_t before = app.get_subcommands({}).size();
    weft::cli::Action a = add(app);
    actions.emplace_back(app.get_subcommands({})[before], std::move(a));
  }
  // llama.cpp's two-letter short flags, which CLI11 cannot name directly.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {
    if (a == "-sm")
      a = "--split-mode";
    else if (a == "-ts")
      a = "--tensor-split";
    else if (a == "-ctk")
      a = "--cache-type-k";
    else if (a == "-ctv")
      a = "--cache-type-v";
    else if (a == "-npp" || a == "-ntg" || a == "-npl" || a == "-pg" || a == "-mmp")  // llama-(batched-)bench's
      a = "-" + a;
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [cmd, action] : actions)
      if (cmd->parsed()) return action();
  } catch (const weft::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "weft: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "weft: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
