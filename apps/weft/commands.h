// Subcommands of the `weft` CLI. Each adds itself to the app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace weft::cli {

// A subcommand's body, run after parsing; returns the process exit code.
using Action = std::function<int()>;

Action add_run(CLI::App& app);
Action add_bench(CLI::App& app);
Action add_perplexity(CLI::App& app);
Action add_batched_bench(CLI::App& app);
Action add_plan(CLI::App& app);
Action add_info(CLI::App& app);
Action add_tokenize(CLI::App& app);
Action add_gen_model(CLI::App& app);
Action add_worker(CLI::App& app);

}  // namespace weft::cli
