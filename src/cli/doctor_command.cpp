// `kiln doctor [--json]`: what this machine offers kiln, and why a device is refused.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.h"
#include "kiln/context.h"
#include "kiln/runtime.h"

namespace kiln::cli {

void register_doctor_command(CLI::App& app, CommandList& commands) {
  CLI::App* doctor = app.add_subcommand(
      "doctor", "Report CPU, SIMD target, threads, memory bandwidth, BLAS, allocator and CUDA availability");
  // Shared with the run callback, which outlives this function.
  auto as_json = std::make_shared<bool>(false);
  doctor->add_flag("--json", *as_json, "Print the same facts as JSON");
  commands.push_back({doctor, [as_json] {
                        const ExecutionContext context = current_context();  // holds its pool while probing
                        const DoctorReport report = collect_doctor_report(context.pool());
                        if (*as_json) {
                          fmt::print("{}\n", doctor_report_json(report));
                        } else {
                          fmt::print("{}", format_doctor_report(report));
                        }
                        return 0;
                      }});
}

}  // namespace kiln::cli
