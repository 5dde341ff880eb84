// Streaming read of tokenizer.json. A real file is ~7 MB, almost all of it model.vocab
// (150k entries) and model.merges (150k pairs); building nlohmann's tree for those costs
// about a second, so a SAX pass collects them straight into vectors and keeps a tree only
// for the small rest of the file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::llm::tok {

struct TokenizerJson {
  nlohmann::json rest;  // the document without model.vocab and model.merges when those were collected
  bool has_vocab = false;   // model.vocab was an object, collected into `vocab`
  bool has_merges = false;  // model.merges was an array, collected into `merges`
  std::vector<std::pair<std::string, int32_t>> vocab;  // in file order
  std::vector<std::pair<std::string, std::string>> merges;
};

// Invalid JSON, or a vocab id or merge of the wrong form, is a Value error naming `source`.
TokenizerJson read_tokenizer_json(const std::string& text, const std::string& source, int64_t max_token_id);

}  // namespace kiln::llm::tok
