// The reduction engine (see reduce_loop.h for the strategies).
#include "backend/cpu/reduce/reduce_loop.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "backend/cpu/cast/cast.h"
#include "kiln/error.h"

namespace kiln::cpu {
namespace {

// Work per parallel chunk, in elements, below which splitting does not pay.
constexpr int64_t kGrainElements = 32768;
// Fewer independent column blocks than this: also split the rows, so both cores work.
constexpr int64_t kMinColumnItems = 16;
// Outputs handed to the sink at once.
constexpr int64_t kSinkBatch = 256;
// Shortest rows worth a row kernel call, narrowest columns worth a column kernel.
constexpr int64_t kMinRowLength = 16;
constexpr int64_t kMinColumnWidth = 8;

struct Dim {
  int64_t size;
  int64_t stride;  // elements
};

int64_t dims_numel(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

// Drops size-1 dims and merges neighbours (outermost first) that address memory as one.
std::vector<Dim> coalesce(const std::vector<Dim>& dims) {
  std::vector<Dim> out;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!out.empty() && out.back().stride == d.stride * d.size) {
      out.back().size *= d.size;
      out.back().stride = d.stride;
    } else {
      out.push_back(d);
    }
  }
  return out;
}

// Walks the flat indices of `dims` in row-major order, tracking the element offset.
class Odometer {
 public:
  explicit Odometer(const std::vector<Dim>& dims) : dims_(dims), index_(dims.size(), 0) {}

  void seek(int64_t flat) {
    offset_ = 0;
    for (size_t k = dims_.size(); k-- > 0;) {
      index_[k] = flat % dims_[k].size;
      flat /= dims_[k].size;
      offset_ += index_[k] * dims_[k].stride;
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t k = dims_.size(); k-- > 0;) {
      offset_ += dims_[k].stride;
      if (++index_[k] < dims_[k].size) return;
      offset_ -= dims_[k].stride * dims_[k].size;
      index_[k] = 0;
    }
  }

 private:
  const std::vector<Dim>& dims_;
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

// Combines a stream of partials pairwise, like a binary counter: the k-th level holds
// the combination of a run of 2^k consecutive partials. The tree depends only on the
// number of partials, never on who computed them.
class PairwiseFold {
 public:
  explicit PairwiseFold(CombineFn combine) : combine_(combine) {}
  void reset() { count_ = 0; }
  void push(ReducePartial p) {
    int level = 0;
    for (uint64_t c = count_; c & 1; c >>= 1, ++level) {
      ReducePartial merged = levels_[level];
      combine_(&merged, p);
      p = merged;
    }
    levels_[level] = p;
    ++count_;
  }
  // Needs at least one push.
  ReducePartial result() const {
    int level = std::bit_width(count_) - 1;
    if (level < 0) return ReducePartial{};
    ReducePartial r = levels_[level];
    while (level-- > 0) {
      if ((count_ >> level) & 1) combine_(&r, levels_[level]);
    }
    return r;
  }

 private:
  CombineFn combine_;
  uint64_t count_ = 0;
  ReducePartial levels_[64];
};

// PairwiseFold for a block of w columns at once.
class ColumnFold {
 public:
  ColumnFold(CombineFn combine, int64_t w, int64_t max_pushes)
      : combine_(combine), w_(w), levels_(static_cast<size_t>(std::bit_width(static_cast<uint64_t>(max_pushes))) * w),
        carry_(w) {}
  void reset() { count_ = 0; }
  void push(const ReducePartial* p, int64_t w) {
    std::copy(p, p + w, carry_.begin());
    int level = 0;
    for (uint64_t c = count_; c & 1; c >>= 1, ++level) {
      ReducePartial* lv = &levels_[level * w_];
      for (int64_t j = 0; j < w; ++j) {
        ReducePartial merged = lv[j];
        combine_(&merged, carry_[j]);
        carry_[j] = merged;
      }
    }
    std::copy(carry_.begin(), carry_.begin() + w, levels_.begin() + level * w_);
    ++count_;
  }
  // Needs at least one push.
  void result(ReducePartial* out, int64_t w) const {
    int level = std::bit_width(count_) - 1;
    if (level < 0) return;
    std::copy(levels_.begin() + level * w_, levels_.begin() + level * w_ + w, out);
    while (level-- > 0) {
      if (!((count_ >> level) & 1)) continue;
      for (int64_t j = 0; j < w; ++j) combine_(&out[j], levels_[level * w_ + j]);
    }
  }

 private:
  CombineFn combine_;
  int64_t w_;
  uint64_t count_ = 0;
  std::vector<ReducePartial> levels_;
  std::vector<ReducePartial> carry_;
};

struct Context {
  ThreadPool& pool;
  const ReduceSpec& spec;
  ReduceKernel kernel;
  ReduceSink& sink;
  DType in_dtype;
  DType compute;  // the kernel's dtype; blocks are converted to it when it differs
  const char* base;
};

// Converts n elements at p to the compute dtype in scratch, if needed.
const void* as_compute(const Context& cx, const char* p, int64_t n, std::vector<char>& scratch) {
  if (cx.in_dtype == cx.compute) return p;
  const int64_t in_size = static_cast<int64_t>(itemsize(cx.in_dtype));
  const int64_t out_size = static_cast<int64_t>(itemsize(cx.compute));
  cast_strided(cx.in_dtype, p, in_size, cx.compute, scratch.data(), out_size, n);
  return scratch.data();
}

// ---- rows: the innermost reduced dim (length L) is contiguous ----
void reduce_rows(const Context& cx, const std::vector<Dim>& kept, const std::vector<Dim>& red) {
  const std::vector<Dim> groups(red.begin(), red.end() - 1);
  const int64_t L = red.back().size;
  const int64_t G = dims_numel(groups);
  const int64_t blocks = (L + kRowBlock - 1) / kRowBlock;
  const int64_t parts = G * blocks;  // partials per output
  const int64_t outputs = dims_numel(kept);
  const int64_t in_size = static_cast<int64_t>(itemsize(cx.in_dtype));
  const size_t scratch_bytes = cx.in_dtype == cx.compute ? 0 : kRowBlock * itemsize(cx.compute);

  // Partial q of the output at element offset `out_offset`.
  auto block_partial = [&](int64_t out_offset, int64_t q, Odometer& group_it, std::vector<char>& scratch) {
    const int64_t g = q / blocks, b = q % blocks;
    group_it.seek(g);
    const int64_t start = b * kRowBlock;
    const int64_t n = std::min(kRowBlock, L - start);
    const char* p = cx.base + (out_offset + group_it.offset() + start) * in_size;
    ReducePartial part;
    cx.kernel.row(as_compute(cx, p, n, scratch), n, g * L + start, cx.spec.params, &part);
    return part;
  };

  if (parts == 1 || outputs >= 2 * cx.pool.num_threads()) {
    // Split over outputs; each thread folds its outputs' partials itself.
    const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, G * L));
    cx.pool.parallel_for(outputs, grain, [&](int64_t begin, int64_t end) {
      std::vector<char> scratch(scratch_bytes);
      Odometer out_it(kept), group_it(groups);
      PairwiseFold fold(cx.kernel.combine);
      ReducePartial batch[kSinkBatch];
      out_it.seek(begin);
      for (int64_t o = begin; o < end;) {
        const int64_t n = std::min(kSinkBatch, end - o);
        for (int64_t k = 0; k < n; ++k, out_it.next()) {
          if (parts == 1) {
            batch[k] = block_partial(out_it.offset(), 0, group_it, scratch);
            continue;
          }
          fold.reset();
          for (int64_t q = 0; q < parts; ++q) fold.push(block_partial(out_it.offset(), q, group_it, scratch));
          batch[k] = fold.result();
        }
        cx.sink.consume(batch, o, n);
        o += n;
      }
    });
    return;
  }
  // Few outputs with many blocks each: compute all blocks in parallel, then fold.
  std::vector<ReducePartial> partials(static_cast<size_t>(outputs * parts));
  cx.pool.parallel_for(outputs * parts, 1, [&](int64_t begin, int64_t end) {
    std::vector<char> scratch(scratch_bytes);
    Odometer out_it(kept), group_it(groups);
    for (int64_t t = begin; t < end; ++t) {
      out_it.seek(t / parts);
      partials[t] = block_partial(out_it.offset(), t % parts, group_it, scratch);
    }
  });
  PairwiseFold fold(cx.kernel.combine);
  for (int64_t o = 0; o < outputs; ++o) {
    fold.reset();
    for (int64_t q = 0; q < parts; ++q) fold.push(partials[o * parts + q]);
    const ReducePartial r = fold.result();
    cx.sink.consume(&r, o, 1);
  }
}

// ---- columns: the innermost kept dim (width W) is contiguous ----
// Outputs are split into blocks of kColumnBlockWidth columns; each block reads the
// reduced rows kColumnBlockRows at a time through row pointers (any reduced layout).
void reduce_columns(const Context& cx, const std::vector<Dim>& kept, const std::vector<Dim>& red) {
  const std::vector<Dim> outer(kept.begin(), kept.end() - 1);
  const int64_t W = kept.back().size;
  const int64_t R = dims_numel(red);
  const int64_t col_blocks = (W + kColumnBlockWidth - 1) / kColumnBlockWidth;
  const int64_t items = dims_numel(outer) * col_blocks;
  const int64_t segments = (R + kColumnBlockRows - 1) / kColumnBlockRows;
  // Row ranges per item ("spans"): one, unless there are too few items to share out.
  // The split depends on the shape only, so results stay independent of threads.
  int64_t spans = items >= kMinColumnItems ? 1 : std::min(segments, (kMinColumnItems + items - 1) / items);
  const int64_t segs_per_span = (segments + spans - 1) / spans;
  spans = (segments + segs_per_span - 1) / segs_per_span;
  const int64_t in_size = static_cast<int64_t>(itemsize(cx.in_dtype));
  const int64_t k_size = static_cast<int64_t>(itemsize(cx.compute));
  const bool convert = cx.in_dtype != cx.compute;

  struct Scratch {
    std::vector<const void*> rows = std::vector<const void*>(kColumnBlockRows);
    std::vector<char> converted;
    std::vector<ReducePartial> segment = std::vector<ReducePartial>(kColumnBlockWidth);
  };
  // Reduces span s of item t into out[0, w).
  auto run_span = [&](int64_t t, int64_t s, Scratch& sc, Odometer& outer_it, Odometer& row_it, ColumnFold& fold,
                      ReducePartial* out) {
    const int64_t c0 = (t % col_blocks) * kColumnBlockWidth;
    const int64_t w = std::min(kColumnBlockWidth, W - c0);
    outer_it.seek(t / col_blocks);
    const int64_t col_offset = outer_it.offset() + c0;
    const int64_t first_row = s * segs_per_span * kColumnBlockRows;
    const int64_t last_row = std::min(R, first_row + segs_per_span * kColumnBlockRows);
    fold.reset();
    row_it.seek(first_row);
    for (int64_t r0 = first_row; r0 < last_row; r0 += kColumnBlockRows) {
      const int64_t nrows = std::min(kColumnBlockRows, last_row - r0);
      for (int64_t r = 0; r < nrows; ++r, row_it.next()) {
        const char* p = cx.base + (col_offset + row_it.offset()) * in_size;
        if (convert) {
          char* dst = sc.converted.data() + r * w * k_size;
          cast_strided(cx.in_dtype, p, in_size, cx.compute, dst, k_size, w);
          p = dst;
        }
        sc.rows[r] = p;
      }
      cx.kernel.column(sc.rows.data(), nrows, w, r0, cx.spec.params, sc.segment.data());
      fold.push(sc.segment.data(), w);
    }
    fold.result(out, w);
  };
  auto make_scratch = [&] {
    Scratch sc;
    if (convert) sc.converted.resize(static_cast<size_t>(kColumnBlockRows * kColumnBlockWidth * k_size));
    return sc;
  };

  if (spans == 1) {
    const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, R * kColumnBlockWidth));
    cx.pool.parallel_for(items, grain, [&](int64_t begin, int64_t end) {
      Scratch sc = make_scratch();
      Odometer outer_it(outer), row_it(red);
      ColumnFold fold(cx.kernel.combine, kColumnBlockWidth, segments);
      std::vector<ReducePartial> result(kColumnBlockWidth);
      for (int64_t t = begin; t < end; ++t) {
        run_span(t, 0, sc, outer_it, row_it, fold, result.data());
        const int64_t c0 = (t % col_blocks) * kColumnBlockWidth;
        cx.sink.consume(result.data(), (t / col_blocks) * W + c0, std::min(kColumnBlockWidth, W - c0));
      }
    });
    return;
  }
  std::vector<ReducePartial> partials(static_cast<size_t>(items * spans * kColumnBlockWidth));
  cx.pool.parallel_for(items * spans, 1, [&](int64_t begin, int64_t end) {
    Scratch sc = make_scratch();
    Odometer outer_it(outer), row_it(red);
    ColumnFold fold(cx.kernel.combine, kColumnBlockWidth, segs_per_span);
    for (int64_t u = begin; u < end; ++u) {
      run_span(u / spans, u % spans, sc, outer_it, row_it, fold, &partials[u * kColumnBlockWidth]);
    }
  });
  for (int64_t t = 0; t < items; ++t) {
    const int64_t c0 = (t % col_blocks) * kColumnBlockWidth;
    const int64_t w = std::min(kColumnBlockWidth, W - c0);
    ReducePartial* acc = &partials[t * spans * kColumnBlockWidth];
    for (int64_t s = 1; s < spans; ++s) {
      const ReducePartial* next = acc + s * kColumnBlockWidth;
      for (int64_t j = 0; j < w; ++j) cx.kernel.combine(&acc[j], next[j]);
    }
    cx.sink.consume(acc, (t / col_blocks) * W + c0, w);
  }
}

}  // namespace

void reduce_loop(ThreadPool& pool, const Tensor& input, const std::vector<bool>& reduced, const ReduceSpec& spec,
                 ReduceSink& sink) {
  const int64_t ndim = input.dim();
  KILN_CHECK(static_cast<int64_t>(reduced.size()) == ndim, "reduce", "{} reduce flags for a {}-dim tensor",
             reduced.size(), ndim);
  std::vector<Dim> kept, red;
  std::vector<int64_t> kept_order, red_order;  // logical dims, for the copy strategy
  for (int64_t d = 0; d < ndim; ++d) {
    (reduced[d] ? red : kept).push_back({input.sizes()[d], input.strides()[d]});
    (reduced[d] ? red_order : kept_order).push_back(d);
  }
  const int64_t outputs = dims_numel(kept);
  if (outputs == 0) return;
  if (dims_numel(red) == 0) {
    const ReducePartial identity = reduce_identity(spec.kind);
    std::vector<ReducePartial> batch(static_cast<size_t>(std::min(outputs, kSinkBatch)), identity);
    for (int64_t o = 0; o < outputs; o += kSinkBatch) sink.consume(batch.data(), o, std::min(kSinkBatch, outputs - o));
    return;
  }
  // The arg ops report a row-major index over the reduced dims, so those keep their
  // order; for the others, sorting by stride lets more layouts coalesce into rows.
  const bool ordered = spec.kind == ReduceKind::ArgMax || spec.kind == ReduceKind::ArgMin;
  if (!ordered) {
    // A one-element dim may carry any stride (INT64_MIN has no absolute value); coalesce
    // drops it anyway, so it sorts as 0.
    const auto magnitude = [](const Dim& d) { return d.size == 1 ? 0 : std::llabs(d.stride); };
    std::stable_sort(red.begin(), red.end(), [&](const Dim& a, const Dim& b) { return magnitude(a) > magnitude(b); });
  }
  std::vector<Dim> kept_c = coalesce(kept), red_c = coalesce(red);
  if (red_c.empty()) red_c.push_back({1, 1});

  const DType compute = reduce_compute_dtype(spec.kind, input.dtype());
  Context cx{pool, spec, reduce_kernel(spec.kind, compute), sink, input.dtype(), compute,
             static_cast<const char*>(input.data_ptr())};
  // Short rows cost a kernel call per handful of elements: with many outputs they are
  // better reduced as columns of a transposed copy.
  const int64_t L = dims_numel(red_c);
  const bool short_rows = L < kMinRowLength && outputs >= kMinColumnWidth;
  const Dim inner_red = red_c.back();
  if (inner_red.stride == 1 && !short_rows && (inner_red.size >= kMinRowLength || red_c.size() == 1)) {
    reduce_rows(cx, kept_c, red_c);
    return;
  }
  if (!kept_c.empty() && kept_c.back().stride == 1 && kept_c.back().size >= kMinColumnWidth) {
    reduce_columns(cx, kept_c, red_c);
    return;
  }
  // Copy, contiguous and already in the compute dtype, with the reduced dims (in
  // logical order) last, one row of L elements per output; or first, for short rows.
  std::vector<int64_t> perm = short_rows ? red_order : kept_order;
  const std::vector<int64_t>& rest = short_rows ? kept_order : red_order;
  perm.insert(perm.end(), rest.begin(), rest.end());
  Tensor permuted = input.permute(perm);
  Tensor packed = compute == input.dtype() ? permuted.contiguous() : permuted.to(compute);
  Context packed_cx{pool, spec, cx.kernel, sink, compute, compute, static_cast<const char*>(packed.data_ptr())};
  if (short_rows) {
    reduce_columns(packed_cx, {{outputs, 1}}, {{L, outputs}});
  } else {
    reduce_rows(packed_cx, {{outputs, L}}, {{L, 1}});
  }
}

}  // namespace kiln::cpu
