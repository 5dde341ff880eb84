// The `kiln` executable: global options, then one subcommand (see commands.h).
// Exit codes: 0 success, 1 a kiln::Error or other failure, 2 bad command-line arguments.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "kiln/error.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: run modern models on the machine you have", "kiln"};
  app.set_version_flag("--version", std::string("kiln ") + kiln::kiln_version());
  int threads = 0;
  app.add_option("--threads", threads,
                 "CPU threads (default: KILN_NUM_THREADS, else the physical core count)")
      ->check(CLI::Range(1, kiln::kMaxPoolThreads));
  // Lets global options also follow the subcommand: `kiln doctor --threads 4`.
  app.fallthrough();
  app.require_subcommand(1);

  kiln::cli::CommandList commands;
  kiln::cli::register_doctor_command(app, commands);
  kiln::cli::register_bench_command(app, commands);
  kiln::cli::register_make_model_command(app, commands);
  kiln::cli::register_run_command(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    if (threads > 0) kiln::set_num_threads(threads);
    for (const kiln::cli::Command& command : commands) {
      if (app.got_subcommand(command.parser)) return command.run();
    }
    return 2;  // unreachable while require_subcommand(1) holds
  } catch (const kiln::Error& e) {
    fmt::print(stderr, "kiln: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln: internal error: {}\n", e.what());
    return 1;
  }
}
