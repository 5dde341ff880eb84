// `kiln bench --device vulkan`: the decode kernels on the Vulkan device (bench_vulkan.cpp).
#pragma once

#include <string>

namespace kiln::bench {

// Prints the table; returns the command's exit status (2 when Vulkan is unusable or the
// filter matches no row).
int run_vulkan_bench(const std::string& filter, bool quick);

}  // namespace kiln::bench
