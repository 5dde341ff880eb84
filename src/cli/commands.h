// Subcommands of the `kiln` executable. Each lives in its own file and adds itself to the
// parser through a register_*_command function called from main.cpp.
#pragma once

#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace kiln::cli {

// A subcommand's parser, and what runs when it was chosen (after global options such as
// --threads have been applied); run returns the process exit code.
struct Command {
  CLI::App* parser = nullptr;
  std::function<int()> run;
};
using CommandList = std::vector<Command>;

void register_doctor_command(CLI::App& app, CommandList& commands);
void register_bench_command(CLI::App& app, CommandList& commands);
void register_make_model_command(CLI::App& app, CommandList& commands);
void register_run_command(CLI::App& app, CommandList& commands);

}  // namespace kiln::cli
