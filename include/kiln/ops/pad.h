// torch.nn.functional.pad.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// pad(input, pad, mode="constant", value=None): `pad` holds (left, right) pairs from the
// last dim backwards. Negative pads crop.
//  - constant: any number of padded dims, any dtype; `value` (default 0) fills. The
//    result is allocated once, filled and the input copied into it (no intermediates).
//  - reflect, replicate, circular: the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 dim
//    input. reflect needs each pad < the dim's size, circular <= it; replicate repeats
//    the edge. Built from index_select, so their backward sums each output gradient
//    into its source (deterministic).
// Errors: Value for an unknown mode, a value with a non-constant mode; Runtime for odd or
// too long pad lists, wrong input ranks, pads too large, an output size below 0 (below 1
// for the non-constant modes).
Tensor pad(const Tensor& input, const std::vector<int64_t>& pad, std::string_view mode = "constant",
           std::optional<double> value = std::nullopt);

}  // namespace kiln
