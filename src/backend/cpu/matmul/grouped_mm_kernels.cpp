// grouped_mm on the CPU: one pass over offs builds the (group, row tile, column tile) work
// list, one parallel region runs it (see grouped_mm_kernels.h for the two tile paths).
#include "backend/cpu/matmul/grouped_mm_kernels.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul/blas.h"
#include "backend/cpu/cast/cast.h"
#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

constexpr const char* kOp = "grouped_mm";

// Output columns per work item. On the small-group path a tile's weights (64 x K = 2048
// bf16 = 256 KiB) stay in L2 while each of the group's rows streams over them, so an
// expert's weights come from memory once however many rows the group has.
constexpr int64_t kTileN = 64;
// Output rows per work item on the sgemm path: large enough that the widened B tile is
// reused over many rows, small enough that a big group still splits over the threads.
constexpr int64_t kTileM = 128;
// Groups of at most this many rows take a small-group path. On the prefill shape of
// bench_grouped_mm (512 rows over 128 experts, ~4 rows a group, bf16, H 2048 -> I 768, 2
// busy cores) the w.T-view case ran in ~80 ms on the GEMV path against ~210 ms with every
// group on widen + sgemm: at a few rows per expert the work is bound by streaming the
// weights, which the GEMV path reads once in bf16 while the sgemm path first writes and
// re-reads them as f32 (and OpenBLAS packs them again). Sending every group to the GEMV
// path (threshold 64) measured the same as 8 within the noise.
constexpr int64_t kSmallGroupRows = 8;
// Below this much estimated work (multiply-adds) the pool's wake-up costs more than it
// saves: the whole call runs on the caller.
constexpr double kMinParallelWork = 1 << 18;

// Every column scale of an fp8 tile is applied after the sgemm, so the tile is decoded
// with unit scales.
constexpr auto kUnitScales = [] {
  std::array<float, kTileN> ones{};
  ones.fill(1.0f);
  return ones;
}();

// One group's product C (m x n, row stride ldc, unit column stride) = A (m x k) @ B (k x n),
// pointers at element (0, 0), strides in elements.
struct Problem {
  const char* a;
  int64_t a_rs, a_cs;
  const char* b;
  int64_t b_rs, b_cs;
  char* c;
  int64_t ldc;
  int64_t m, n, k;
  const float* col_scale;  // n scales (fp8 B) or nullptr
};

struct WorkItem {
  int64_t problem;
  int64_t m0, m1, n0, n1;
};

// Calls that run nested inside the one parallel region (the GEMV kernels take a pool) get
// this one-thread pool, so they can never open a second region of their own.
ThreadPool& serial_pool() {
  static ThreadPool pool(1);
  return pool;
}

int64_t esz(DType t) { return static_cast<int64_t>(itemsize(t)); }

// p + bytes, where an empty operand may have no storage at all (null): null plus an
// offset is undefined even when nothing is read through it.
template <typename T>
T* advance(T* p, int64_t bytes) {
  return p == nullptr ? p : p + bytes;
}

// The G problems of a call, with offs checked on the way (the single pass over offs).
std::vector<Problem> build_problems(const GroupedMmArgs& args) {
  const GroupedOperand& A = args.a;
  const GroupedOperand& B = args.b;
  const char* a = static_cast<const char*>(A.data);
  const char* b = static_cast<const char*>(B.data);
  char* out = static_cast<char*>(args.out);
  const int64_t ea = esz(A.dtype), eb = esz(B.dtype), ec = esz(args.out_dtype);
  // Extent of the grouped dimension the offsets index.
  int64_t extent = 0;
  switch (args.kind) {
    case GroupedMmCase::Jagged2Dx3D: extent = A.rows; break;
    case GroupedMmCase::Jagged3Dx2D: extent = B.cols; break;
    // PyTorch slices A's columns and B's rows separately; both slices must exist.
    case GroupedMmCase::Jagged2Dx2D: extent = std::min(A.cols, B.rows); break;
    case GroupedMmCase::Batched3Dx3D: break;
  }
  std::vector<Problem> problems;
  problems.reserve(static_cast<size_t>(args.groups));
  int64_t start = 0;
  for (int64_t g = 0; g < args.groups; ++g) {
    int64_t end = 0;
    if (args.offs != nullptr) {
      end = args.offs[g];
      KILN_CHECK_KIND(end >= start && end <= extent, Value, kOp,
                      "offs must be non-decreasing cumulative group ends in [0, {}] (the size of the grouped "
                      "dimension), but offs[{}] = {} follows {}",
                      extent, g, end, start);
    }
    Problem p{};
    p.a_rs = A.row_stride;
    p.a_cs = A.col_stride;
    p.b_rs = B.row_stride;
    p.b_cs = B.col_stride;
    switch (args.kind) {
      case GroupedMmCase::Jagged2Dx3D:
        p.a = advance(a, start * A.row_stride * ea);
        p.b = advance(b, g * B.batch_stride * eb);
        p.c = advance(out, start * B.cols * ec);
        p.ldc = B.cols;
        p.m = end - start, p.n = B.cols, p.k = A.cols;
        if (args.b_scale != nullptr) p.col_scale = args.b_scale + g * B.cols;
        break;
      case GroupedMmCase::Jagged3Dx2D:
        p.a = advance(a, g * A.batch_stride * ea);
        p.b = advance(b, start * B.col_stride * eb);
        p.c = advance(out, start * ec);
        p.ldc = B.cols;
        p.m = A.rows, p.n = end - start, p.k = A.cols;
        break;
      case GroupedMmCase::Jagged2Dx2D:
        p.a = advance(a, start * A.col_stride * ea);
        p.b = advance(b, start * B.row_stride * eb);
        p.c = advance(out, g * A.rows * B.cols * ec);
        p.ldc = B.cols;
        p.m = A.rows, p.n = B.cols, p.k = end - start;
        break;
      case GroupedMmCase::Batched3Dx3D:
        p.a = advance(a, g * A.batch_stride * ea);
        p.b = advance(b, g * B.batch_stride * eb);
        p.c = advance(out, g * A.rows * B.cols * ec);
        p.ldc = B.cols;
        p.m = A.rows, p.n = B.cols, p.k = A.cols;
        break;
    }
    problems.push_back(p);
    start = end;
  }
  return problems;
}

// PyTorch leaves the output rows (2Dx3D) or columns (3Dx2D) past offs[G-1] uninitialised;
// kiln zeroes them so every output element is deterministic (offs already checked).
void zero_uncovered(const GroupedMmArgs& args) {
  if (args.kind != GroupedMmCase::Jagged2Dx3D && args.kind != GroupedMmCase::Jagged3Dx2D) return;
  const int64_t covered = args.groups > 0 ? args.offs[args.groups - 1] : 0;
  const int64_t ec = esz(args.out_dtype), n = args.b.cols;
  char* out = static_cast<char*>(args.out);
  if (args.kind == GroupedMmCase::Jagged2Dx3D && covered < args.a.rows) {
    std::memset(out + covered * n * ec, 0, static_cast<size_t>((args.a.rows - covered) * n * ec));
  } else if (args.kind == GroupedMmCase::Jagged3Dx2D && covered < n) {
    for (int64_t r = 0; r < args.a.rows; ++r) {
      std::memset(out + (r * n + covered) * ec, 0, static_cast<size_t>((n - covered) * ec));
    }
  }
}

// Whether a work item can run the GEMV path: few rows, B's columns contiguous in k (the
// transposed [N, K] weight view), A's rows contiguous, one dtype (or fp8 weights).
bool takes_gemv_path(const GroupedMmArgs& args, const Problem& p, int64_t rows) {
  return rows <= kSmallGroupRows && (p.b_rs == 1 || p.k == 1) && (p.a_cs == 1 || p.k == 1) &&
         (args.b.dtype == args.a.dtype || args.b.dtype == DType::Float8_e4m3fn) &&
         args.out_dtype == args.a.dtype && gemv_for(args.b.dtype) != nullptr;
}

void run_gemv_item(const GroupedMmArgs& args, const Problem& p, const WorkItem& w) {
  thread_local std::vector<float> x_scratch;
  const int64_t ea = esz(args.a.dtype), eb = esz(args.b.dtype), ec = esz(args.out_dtype);
  x_scratch.resize(static_cast<size_t>(gemv_scratch_floats(p.k)));
  LinearWeight weight;
  weight.data = p.b + w.n0 * p.b_cs * eb;
  weight.dtype = args.b.dtype;
  weight.row_stride = p.b_cs;
  weight.N = w.n1 - w.n0;
  weight.K = p.k;
  weight.scale = p.col_scale != nullptr ? p.col_scale + w.n0 : nullptr;
  weight.scale_layout = Fp8ScaleLayout::PerRow;
  const GemvFn gemv = gemv_for(args.b.dtype);
  for (int64_t r = w.m0; r < w.m1; ++r) {
    LinearActivations act;
    act.dtype = args.a.dtype;
    act.x = p.a + r * p.a_rs * ea;
    act.M = 1;
    act.y = p.c + (r * p.ldc + w.n0) * ec;
    gemv(serial_pool(), weight, act, x_scratch.data());
  }
}

// A float32 matrix as OpenBLAS reads it.
struct BlasMatrix {
  const float* data;
  bool transposed;
  int ld;
};

// A rows x cols operand (row- or column-major, as validated) as float32: read in place when
// it already is float32 with a leading dimension BLAS takes, else widened into `buf` in its
// own orientation (contiguous runs, so the SIMD conversion does the work).
BlasMatrix as_f32(const char* src, DType dtype, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                  std::vector<float>& buf) {
  const bool row_major = cs == 1 || cols == 1;
  if (dtype == DType::Float32) {
    const int64_t ld = row_major ? std::max({rs, cols, int64_t{1}}) : std::max({cs, rows, int64_t{1}});
    if (ld <= INT_MAX) {
      return {reinterpret_cast<const float*>(src), !row_major, static_cast<int>(ld)};
    }
  }
  buf.resize(static_cast<size_t>(rows * cols));
  const int64_t e = esz(dtype);
  if (row_major) {
    for (int64_t r = 0; r < rows; ++r) to_f32(dtype, src + r * rs * e, buf.data() + r * cols, cols);
    return {buf.data(), false, static_cast<int>(std::max<int64_t>(cols, 1))};
  }
  for (int64_t c = 0; c < cols; ++c) to_f32(dtype, src + c * cs * e, buf.data() + c * rows, rows);
  return {buf.data(), true, static_cast<int>(std::max<int64_t>(rows, 1))};
}

void run_sgemm_item(const GroupedMmArgs& args, const Problem& p, const WorkItem& w) {
  thread_local std::vector<float> a_buf, b_buf, c_buf;
  const int64_t ea = esz(args.a.dtype), eb = esz(args.b.dtype), ec = esz(args.out_dtype);
  const int64_t mt = w.m1 - w.m0, nt = w.n1 - w.n0, k = p.k;
  const BlasMatrix A = as_f32(p.a + w.m0 * p.a_rs * ea, args.a.dtype, mt, k, p.a_rs, p.a_cs, a_buf);
  const char* b_tile = p.b + w.n0 * p.b_cs * eb;
  BlasMatrix B{};
  if (args.b.dtype == DType::Float8_e4m3fn) {
    // The tile's weight rows decoded exactly as the GEMV path reads them; scales come after.
    LinearWeight weight;
    weight.data = b_tile;
    weight.dtype = DType::Float8_e4m3fn;
    weight.row_stride = p.b_cs;
    weight.N = nt;
    weight.K = k;
    weight.scale = kUnitScales.data();
    b_buf.resize(static_cast<size_t>(nt * k));
    fp8_rows_to_f32(weight, 0, nt, b_buf.data());
    B = {b_buf.data(), true, static_cast<int>(k)};
  } else {
    B = as_f32(b_tile, args.b.dtype, k, nt, p.b_rs, p.b_cs, b_buf);
  }
  char* c = p.c + (w.m0 * p.ldc + w.n0) * ec;
  const bool direct = args.out_dtype == DType::Float32 && p.col_scale == nullptr;
  float* c_f32 = reinterpret_cast<float*>(c);
  int64_t ldc = p.ldc;
  if (!direct) {
    c_buf.resize(static_cast<size_t>(mt * nt));
    c_f32 = c_buf.data();
    ldc = nt;
  }
  blas::gemm(A.transposed, B.transposed, static_cast<int>(mt), static_cast<int>(nt), static_cast<int>(k), A.data, A.ld,
             B.data, B.ld, 0.0f, c_f32, static_cast<int>(ldc));
  if (direct) return;
  for (int64_t r = 0; r < mt; ++r) {
    float* row = c_f32 + r * nt;
    if (p.col_scale != nullptr) {
      const float* s = p.col_scale + w.n0;
      for (int64_t j = 0; j < nt; ++j) row[j] *= s[j];
    }
    from_f32(row, args.out_dtype, c + r * p.ldc * ec, nt);
  }
}

// Whether a work item can run the row-major small-group kernel: few rows, B rows
// contiguous in n, B float32/bfloat16/float16.
bool takes_rowmajor_path(const GroupedMmArgs& args, const Problem& p, int64_t rows) {
  return rows <= kSmallGroupRows && (p.b_cs == 1 || p.n == 1) && args.b.dtype != DType::Float8_e4m3fn;
}

void run_rowmajor_item(const GroupedMmArgs& args, const Problem& p, const WorkItem& w) {
  thread_local std::vector<float> a_buf, c_buf;
  const int64_t ea = esz(args.a.dtype), eb = esz(args.b.dtype), ec = esz(args.out_dtype);
  const int64_t mt = w.m1 - w.m0, nt = w.n1 - w.n0, k = p.k;
  a_buf.resize(static_cast<size_t>(mt * k));
  for (int64_t r = 0; r < mt; ++r) {
    cast_strided(args.a.dtype, p.a + (w.m0 + r) * p.a_rs * ea, p.a_cs * ea, DType::Float32, a_buf.data() + r * k,
                 sizeof(float), k);
  }
  char* c = p.c + (w.m0 * p.ldc + w.n0) * ec;
  const bool direct = args.out_dtype == DType::Float32;
  float* c_f32 = reinterpret_cast<float*>(c);
  int64_t ldc = p.ldc;
  if (!direct) {
    c_buf.resize(static_cast<size_t>(mt * nt));
    c_f32 = c_buf.data();
    ldc = nt;
  }
  small_rows_times_rowmajor(a_buf.data(), k, mt, p.b + w.n0 * p.b_cs * eb, args.b.dtype, p.b_rs, k, nt, c_f32, ldc);
  if (direct) return;
  for (int64_t r = 0; r < mt; ++r) from_f32(c_f32 + r * nt, args.out_dtype, c + r * p.ldc * ec, nt);
}

void run_item(const GroupedMmArgs& args, const Problem& p, const WorkItem& w) {
  if (p.k == 0) {
    // An empty contraction (a 2Dx2D group with no K, or K = 0): zeros, as mm gives.
    const int64_t ec = esz(args.out_dtype);
    for (int64_t r = w.m0; r < w.m1; ++r) {
      std::memset(p.c + (r * p.ldc + w.n0) * ec, 0, static_cast<size_t>((w.n1 - w.n0) * ec));
    }
  } else if (takes_gemv_path(args, p, w.m1 - w.m0)) {
    run_gemv_item(args, p, w);
  } else if (takes_rowmajor_path(args, p, w.m1 - w.m0)) {
    run_rowmajor_item(args, p, w);
  } else {
    run_sgemm_item(args, p, w);
  }
}

}  // namespace

void grouped_mm(ThreadPool& pool, const GroupedMmArgs& args) {
  const std::vector<Problem> problems = build_problems(args);
  zero_uncovered(args);
  // Work items and their cumulative estimated cost: multiply-adds plus a term for
  // streaming the B tile, which dominates for groups of a few rows.
  std::vector<WorkItem> items;
  std::vector<double> cost_prefix{0.0};
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    for (int64_t m0 = 0; m0 < p.m; m0 += kTileM) {
      const int64_t m1 = std::min(p.m, m0 + kTileM);
      for (int64_t n0 = 0; n0 < p.n; n0 += kTileN) {
        const int64_t n1 = std::min(p.n, n0 + kTileN);
        items.push_back({static_cast<int64_t>(i), m0, m1, n0, n1});
        const double cost = static_cast<double>(m1 - m0 + 4) * static_cast<double>(n1 - n0) *
                            static_cast<double>(std::max<int64_t>(p.k, 1));
        cost_prefix.push_back(cost_prefix.back() + cost);
      }
    }
  }
  if (items.empty()) return;
  ensure_blas_single_threaded();
  const int64_t n_items = static_cast<int64_t>(items.size());
  const double total = cost_prefix.back();
  const int64_t pieces = total < kMinParallelWork ? 1 : std::min<int64_t>(n_items, pool.num_threads());
  // Piece q runs the items whose cost starts in [q, q + 1) * total / pieces: contiguous
  // runs of about equal cost, whatever the group sizes.
  const auto first_item = [&](int64_t q) {
    if (q >= pieces) return n_items;
    const double target = total * static_cast<double>(q) / static_cast<double>(pieces);
    return static_cast<int64_t>(std::lower_bound(cost_prefix.begin(), cost_prefix.begin() + n_items, target) -
                                cost_prefix.begin());
  };
  pool.parallel_for(pieces, 1, [&](int64_t q0, int64_t q1) {
    for (int64_t i = first_item(q0), end = first_item(q1); i < end; ++i) {
      run_item(args, problems[static_cast<size_t>(items[static_cast<size_t>(i)].problem)],
               items[static_cast<size_t>(i)]);
    }
  });
}

}  // namespace kiln::cpu
