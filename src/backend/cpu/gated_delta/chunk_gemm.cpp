// Register-blocked small GEMM of the chunked gated delta rule (chunk_gemm.h), compiled
// once per Highway target.
//
// C is cut into tiles of kRows rows by kVecs vectors of columns. A tile's accumulators
// stay in registers for the whole product: per step p the tile loads kVecs vectors of
// B's row p and broadcasts A(i, p) once per row, so each broadcast feeds kVecs FMAs and
// each B vector kRows FMAs, with kRows x kVecs independent chains (enough to cover the
// FMA latency). Column tiles run outermost, so one tile's panel of B (k x kVecs vectors:
// 32 KiB at k = 128 on AVX-512) stays in L1 while every row block streams past it.
// A last row block or column tile of another size takes the instantiation of its exact
// size (the last vector masked), so nothing outside the operands is read or written.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/gated_delta/chunk_gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>

#include "backend/cpu/gated_delta/chunk_gemm.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Accumulators per tile within the register file, with room for the B vectors and the
// broadcast: 24 + 4 + 1 of AVX-512's 32 registers, 12 + 2 + 1 of AVX2's 16. Six rows
// rather than four: on AVX-512 the 64 x 128 x 128 products ran ~20% faster (fewer B
// loads per FMA), measured against 4 x 4, 8 x 2, 8 x 3, 7 x 3 and 5 x 4 tiles.
// The products that want only the lower part of C (K K^T and Q K^T, 64 x 64 x dk) take
// 8 x 3 tiles instead: there the 6 x 4 tiles ran at a third of the FMA peak (mostly
// narrow, masked tiles near the diagonal) and 8 x 3 at a half (micro-benchmark, Zen 4).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 6, kVecs = 4;
constexpr int64_t kLowerRows = 8, kLowerVecs = 3;
#else
constexpr int64_t kRows = 6, kVecs = 2;
constexpr int64_t kLowerRows = kRows, kLowerVecs = kVecs;
#endif

template <int64_t V, bool kMaskLast, class D>
HWY_INLINE hn::Vec<D> LoadPart(D d, const float* p, int64_t v, hn::Mask<D> last) {
  if constexpr (kMaskLast) {
    if (v == V - 1) return hn::MaskedLoad(last, d, p);
  }
  return hn::LoadU(d, p);
}

// acc[r] += sum_p A(i0 + r, p) B(p, j0 ...) over the term's p range for each row.
template <int64_t R, int64_t V, bool kMaskLast, class D, class Vec = hn::Vec<D>>
HWY_INLINE void AddTerm(D d, const ChunkGemmTerm& t, int64_t i0, int64_t j0, hn::Mask<D> last, Vec (&acc)[R][V]) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const float* HWY_RESTRICT arow[R];
  for (int64_t r = 0; r < R; ++r) arow[r] = t.a + (i0 + r) * t.a_row;
  const float* HWY_RESTRICT b = t.b + j0;
  // Every row of the block takes p <= i0; past that, a lower term's rows stop at their
  // diagonal one by one.
  const int64_t shared = t.lower ? std::min(t.k, i0 + 1) : t.k;
  for (int64_t p = 0; p < shared; ++p) {
    Vec bp[V];
    for (int64_t v = 0; v < V; ++v) bp[v] = LoadPart<V, kMaskLast>(d, b + p * t.ldb + v * N, v, last);
    const int64_t ap = p * t.a_col;
    for (int64_t r = 0; r < R; ++r) {
      const Vec a = hn::Set(d, arow[r][ap]);
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(a, bp[v], acc[r][v]);
    }
  }
  if (!t.lower) return;
  const int64_t end = std::min(t.k, i0 + R);
  for (int64_t p = shared; p < end; ++p) {
    Vec bp[V];
    for (int64_t v = 0; v < V; ++v) bp[v] = LoadPart<V, kMaskLast>(d, b + p * t.ldb + v * N, v, last);
    const int64_t ap = p * t.a_col;
    for (int64_t r = 0; r < R; ++r) {
      if (i0 + r < p) continue;
      const Vec a = hn::Set(d, arow[r][ap]);
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(a, bp[v], acc[r][v]);
    }
  }
}

template <int64_t R, int64_t V, bool kMaskLast, class D>
HWY_NOINLINE void Tile(D d, const ChunkGemmProblem& p, int64_t i0, int64_t j0, size_t last_lanes) {
  using Vec = hn::Vec<D>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto last = hn::FirstN(d, kMaskLast ? last_lanes : static_cast<size_t>(N));
  float* HWY_RESTRICT c = p.c + i0 * p.ldc + j0;
  Vec acc[R][V];
  if (p.accumulate) {
    const Vec scale = hn::Set(d, p.c_scale);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::Mul(scale, LoadPart<V, kMaskLast>(d, c + r * p.ldc + v * N, v, last));
    }
  } else {
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::Zero(d);
    }
  }
  if (p.first.k > 0) {
    if (p.first_row_scale == nullptr) {
      AddTerm<R, V, kMaskLast>(d, p.first, i0, j0, last, acc);
    } else if (!p.accumulate) {
      AddTerm<R, V, kMaskLast>(d, p.first, i0, j0, last, acc);
      for (int64_t r = 0; r < R; ++r) {
        const Vec s = hn::Set(d, p.first_row_scale[i0 + r]);
        for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::Mul(s, acc[r][v]);
      }
    } else {
      // The scaled term needs its own sum: the initial C must not be scaled with it.
      Vec term[R][V];
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t v = 0; v < V; ++v) term[r][v] = hn::Zero(d);
      }
      AddTerm<R, V, kMaskLast>(d, p.first, i0, j0, last, term);
      for (int64_t r = 0; r < R; ++r) {
        const Vec s = hn::Set(d, p.first_row_scale[i0 + r]);
        for (int64_t v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(s, term[r][v], acc[r][v]);
      }
    }
  }
  if (p.second.k > 0) AddTerm<R, V, kMaskLast>(d, p.second, i0, j0, last, acc);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t v = 0; v < V; ++v) {
      float* out = c + r * p.ldc + v * N;
      if (kMaskLast && v == V - 1) hn::BlendedStore(acc[r][v], last, d, out);
      else hn::StoreU(acc[r][v], d, out);
    }
  }
}

// A tile of `vecs` (1..V) vectors, the last one holding last_lanes columns.
template <int64_t R, int64_t V, class D>
HWY_INLINE void TileOfWidth(D d, const ChunkGemmProblem& p, int64_t i0, int64_t j0, int64_t vecs, size_t last_lanes) {
  if constexpr (V >= 1) {
    if (vecs == V) {
      if (last_lanes == hn::Lanes(d)) return Tile<R, V, false>(d, p, i0, j0, last_lanes);
      return Tile<R, V, true>(d, p, i0, j0, last_lanes);
    }
    TileOfWidth<R, V - 1>(d, p, i0, j0, vecs, last_lanes);
  }
}

// A tile of `rows` (1..R) rows and up to VMax vectors.
template <int64_t R, int64_t VMax, class D>
HWY_INLINE void TileOfSize(D d, const ChunkGemmProblem& p, int64_t i0, int64_t rows, int64_t j0, int64_t vecs,
                           size_t last_lanes) {
  if constexpr (R >= 1) {
    if (rows == R) return TileOfWidth<R, VMax>(d, p, i0, j0, vecs, last_lanes);
    TileOfSize<R - 1, VMax>(d, p, i0, rows, j0, vecs, last_lanes);
  }
}

// Prefetches rows [begin, end) of the caller's next inputs, every 64-byte line of each.
HWY_INLINE void PrefetchRows(const ChunkGemmPrefetch& f, int64_t begin, int64_t end) {
  constexpr int64_t kLineFloats = 16;
  for (int64_t r = begin; r < end; ++r) {
    const float* row = f.base + r * f.stride;
    for (int64_t j = 0; j < f.row_floats; j += kLineFloats) hwy::Prefetch(row + j);
    hwy::Prefetch(row + f.row_floats - 1);  // the last line when the row starts mid-line
  }
}

// The product in tiles of up to kR rows by kV vectors.
template <int64_t kR, int64_t kV>
void Products(const ChunkGemmProblem& p) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t tile_cols = kV * N;
  const int64_t row_blocks = (p.rows + kR - 1) / kR;
  const int64_t tiles = (p.cols + tile_cols - 1) / tile_cols * row_blocks;
  const ChunkGemmPrefetch& f = p.prefetch;
  const bool prefetch = f.base != nullptr && f.rows > 0 && f.row_floats > 0 && tiles > 0;
  int64_t tile = 0;
  for (int64_t j0 = 0; j0 < p.cols; j0 += tile_cols) {
    const int64_t width = std::min(tile_cols, p.cols - j0);
    for (int64_t i0 = 0; i0 < p.rows; i0 += kR, ++tile) {
      // The prefetch rows spread evenly over the tiles (tiles skipped below included).
      if (prefetch) PrefetchRows(f, f.rows * tile / tiles, f.rows * (tile + 1) / tiles);
      const int64_t rows = std::min(kR, p.rows - i0);
      // With lower_cols the block needs columns up to its last row's diagonal.
      const int64_t cols = p.lower_cols ? std::min(width, i0 + rows - j0) : width;
      if (cols <= 0) continue;
      const int64_t vecs = (cols + N - 1) / N;
      TileOfSize<kR, kV>(d, p, i0, rows, j0, vecs, static_cast<size_t>(cols - (vecs - 1) * N));
    }
  }
}

void ChunkGemm(const ChunkGemmProblem& p) {
  if (p.lower_cols) return Products<kLowerRows, kLowerVecs>(p);
  Products<kRows, kVecs>(p);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(ChunkGemm);

void chunk_gemm(const ChunkGemmProblem& p) { HWY_DYNAMIC_DISPATCH(ChunkGemm)(p); }

int64_t chunk_gemm_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
