// The one main() of kiln_bench (every bench/*.cpp registers its benchmarks with
// Google Benchmark's macros and none defines main).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
