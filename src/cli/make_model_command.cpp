// `kiln make-model --arch qwen3_moe|lfm2_moe|qwen3|qwen3_next|qwen3_5_moe --preset NAME [--layers N] [--fp8] --out DIR
// [--seed S]`: writes a synthetic Hugging Face checkpoint folder (see kiln/llm_synthetic.h).
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/seed_option.h"
#include "kiln/llm_synthetic.h"

namespace kiln::cli {

void register_make_model_command(CLI::App& app, CommandList& commands) {
  CLI::App* cmd = app.add_subcommand(
      "make-model", "Write a synthetic checkpoint (real tensor names and shapes, random weights) for tests and demos");
  auto options = std::make_shared<llm::SyntheticModelOptions>();
  auto layers = std::make_shared<int64_t>(0);
  cmd->add_option("--arch", options->arch, "Architecture: qwen3_moe, lfm2_moe, qwen3, qwen3_next or qwen3_5_moe")->required();
  cmd->add_option("--preset", options->preset, "tiny, demo (qwen3_moe, lfm2_moe), qwen3-30b-a3b, lfm2-8b-a1b, qwen3-8b, qwen3-next-80b-a3b or "
                  "qwen3.5-35b-a3b")
      ->required();
  CLI::Option* layers_option = cmd->add_option("--layers", *layers, "Keep only the first N layers of the preset");
  cmd->add_flag("--fp8", options->fp8, "Write a Hugging Face FP8 block-scaled checkpoint");
  cmd->add_option("--out", options->out_dir, "Output folder (created if needed)")->required();
  add_seed_option(*cmd, options->seed, "Seed of the weights (default 0)");

  commands.push_back({cmd, [options, layers, layers_option] {
                        if (layers_option->count() > 0) options->num_layers = *layers;
                        // A live counter only where someone watches; logs get the summary line.
                        if (::isatty(STDERR_FILENO)) {
                          options->progress = [](const llm::SyntheticModelProgress& p) {
                            fmt::print(stderr, "\r{:5.1f}%  {}/{} tensors, {:.1f}/{:.1f} MB",
                                       p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0, p.tensors_done,
                                       p.tensors_total, p.bytes_done / 1e6, p.bytes_total / 1e6);
                            if (p.tensors_done == p.tensors_total) fmt::print(stderr, "\n");
                          };
                        }
                        const llm::SyntheticModelSummary model = llm::make_synthetic_model(*options);
                        fmt::print("wrote {}: {} preset '{}', {} layers{}, {:.1f} MB of weights in {} file{}\n",
                                   options->out_dir, model.model_type, options->preset,
                                   model.num_layers, options->fp8 ? ", fp8" : "", model.tensor_bytes / 1e6,
                                   model.shards.size(), model.shards.size() == 1 ? "" : "s");
                        return 0;
                      }});
}

}  // namespace kiln::cli
