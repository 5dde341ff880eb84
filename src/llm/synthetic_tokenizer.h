// Internals of make_synthetic_tokenizer (declared in tokenizer.h) that tests look at.
#pragma once

#include <string_view>

namespace kiln::llm::tok {

// The English text the synthetic tokenizer's merges are learned from.
std::string_view synthetic_training_text();

}  // namespace kiln::llm::tok
