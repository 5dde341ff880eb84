// `kiln bench --filter linalg`: the linear-algebra rows of issue 12 and bincount.
//
//  - inv, 100 000 4x4 float32 (the closed-form kernel): bytes = matrices read + written.
//  - solve_triangular, 256 unit-lower 64x64 blocks with 8 right-hand sides each (the
//    hybrid models' chunked prefill shape): FLOPs = batch * n^2 * k (multiply + add
//    per entry of the lower triangle per right-hand side).
//  - lu_factor, one complex64 256x256 (kiln's recursive LU on the calling thread, its
//    updates single-threaded OpenBLAS gemm calls): FLOPs = 8/3 n^3 (a complex
//    multiply-add is 8 real flops, LU ~n^3/3 of them).
//  - svd, one float32 512x512 (gesdd with vectors).
//  - bincount, 4M int64 values, all but 1 in 1000 the same (one hot bin): bytes = the
//    input read once, which is what the one-pass kernel reads.
// Baselines: PyTorch 1.13 CPU figures from the issue, measured on the build machines.
#include <fmt/core.h>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/linalg.h"

namespace kiln::bench {
namespace {

struct Case {
  const char* group;
  const char* shape;
  double baseline_s;
  const char* baseline_label;
  double target_s;
  const char* target;
};

void add_row(Table& table, const Case& c, const Timing& t, double bytes, double flops) {
  Row row;
  row.group = c.group;
  row.shape = c.shape;
  row.timing = t;
  row.bytes = bytes;
  row.flops = flops;
  row.baseline_s = c.baseline_s;
  row.baseline_label = c.baseline_label;
  row.target = c.target;
  row.has_target = true;
  row.target_met = t.median_s <= c.target_s;
  table.add(row);
}

Tensor well_conditioned(const Shape& shape, DType dtype, Generator& gen) {
  const int64_t n = shape.back();
  const Tensor a = randn(shape, DType::Float32, &gen);
  return add(a, mul(eye(n), Scalar(2.0 * n))).to(dtype);
}

void run(Table& table, bool quick) {
  Generator gen(12);
  const int runs = quick ? 3 : 20;
  const double seconds = quick ? 0.02 : 0.3;
  {
    const Tensor a = well_conditioned({100000, 4, 4}, DType::Float32, gen);
    const Timing t = measure([&](int) { linalg::inv(a); }, runs, seconds);
    add_row(table, {"linalg.inv f32", "100000 x 4x4", 27.6e-3, "PyTorch 1.13 CPU 27.6 ms", 2e-3, "<= 2 ms"}, t,
            2.0 * static_cast<double>(a.nbytes()), 0);
  }
  {
    // Off-diagonal entries of size 1/n, as in a chunk's decay-weighted key products: the
    // unit-lower solve stays bounded (no inf/NaN arithmetic in the timing).
    const Tensor l = mul(randn({256, 64, 64}, DType::Float32, &gen), Scalar(1.0 / 64));
    const Tensor b = randn({256, 64, 8}, DType::Float32, &gen);
    const Timing t = measure([&](int) { linalg::solve_triangular(l, b, false, true, true); }, runs, seconds);
    add_row(table,
            {"linalg.solve_triangular f32", "256 x 64x64 unit-lower, 8 rhs", 385e-6, "PyTorch 1.13 CPU 385 us",
             100e-6, "<= 100 us"},
            t, 0, 256.0 * 64 * 64 * 8);
  }
  {
    const Tensor a = well_conditioned({256, 256}, DType::Complex64, gen);
    const Timing t = measure([&](int) { linalg::lu_factor(a); }, runs, seconds);
    add_row(table, {"linalg.lu_factor c64", "256x256", 0.88e-3, "PyTorch 1.13 CPU 0.88 ms", 0.9e-3, "<= 0.9 ms"}, t,
            0, 8.0 / 3.0 * 256.0 * 256 * 256);
  }
  {
    const Tensor a = randn({512, 512}, DType::Float32, &gen);
    const Timing t = measure([&](int) { linalg::svd(a); }, quick ? 2 : 5, seconds);
    add_row(table, {"linalg.svd f32", "512x512 full_matrices", 35.7e-3, "PyTorch 1.13 CPU 35.7 ms", 36e-3, "<= 36 ms"},
            t, 0, 0);
  }
  {
    const int64_t count = 4 << 20;
    Tensor values = full({count}, Scalar(int64_t{3}), DType::Int64);
    int64_t* p = values.data<int64_t>();
    for (int64_t i = 0; i < count; i += 1000) p[i] = i % 97;  // near-identical, not identical
    const Timing t = measure([&](int) { bincount(values); }, runs, seconds);
    add_row(table,
            {"bincount int64", "4M near-identical", 3.1e-3, "PyTorch 1.13 CPU 3.1 ms", 0.7e-3,
             "<= 0.7 ms (bytes = input once)"},
            t, static_cast<double>(values.nbytes()), 0);
  }
}

const Registrar kRegisterLinalg{Suite{
    "linalg", "inv 100000x4x4, solve_triangular 256x64x64x8, lu_factor c64 256, svd 512, bincount 4M",
    [](ThreadPool&, Table& table, bool quick) { run(table, quick); }}};

}  // namespace
}  // namespace kiln::bench
