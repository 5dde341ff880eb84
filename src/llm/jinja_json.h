// JSON text -> Jinja values, for the conversations, tools and extra variables handed to a
// chat template (object key order kept, as Python's json.loads keeps it; nesting bounded
// by kMaxValueDepth).
#pragma once

#include <string_view>

#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

// Invalid JSON or nesting past kMaxValueDepth is a kiln::Error (Value) under `op`, led by
// `what` ("messages: ").
Value value_from_json(std::string_view text, std::string_view op, std::string_view what);

}  // namespace kiln::llm::jinja
