// Backward formulas of the views (the Tensor methods of core/autograd_meta.h), clone,
// to, and of the joining and index ops. A view's gradient flows back through its own
// node, so views of tensors that require grad keep the gradient flowing.
#include <algorithm>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/shape.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;

// A view whose gradient is the output gradient reshaped to the input's sizes.
Tensor reshaped_back(const char* name, const Tensor& x, Tensor y) {
  const Shape in = x.sizes();
  return record(name, {x}, y, {}, [in](C& c) { return Grads{c.grad().reshape(in)}; });
}

Tensor view_entry(const Tensor& x, const Shape& sizes) {
  return reshaped_back("ViewBackward0", x, below_autograd([&] { return x.view(sizes); }));
}
Tensor squeeze_all_entry(const Tensor& x) {
  return reshaped_back("SqueezeBackward0", x, below_autograd([&] { return x.squeeze(); }));
}
Tensor squeeze_entry(const Tensor& x, int64_t d) {
  return reshaped_back("SqueezeBackward1", x, below_autograd([&] { return x.squeeze(d); }));
}
Tensor unsqueeze_entry(const Tensor& x, int64_t d) {
  return reshaped_back("UnsqueezeBackward0", x, below_autograd([&] { return x.unsqueeze(d); }));
}
Tensor permute_entry(const Tensor& x, const Shape& dims) {
  Tensor y = below_autograd([&] { return x.permute(dims); });
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  return record("PermuteBackward0", {x}, y, {}, [inverse](C& c) { return Grads{c.grad().permute(inverse)}; });
}
Tensor transpose_entry(const Tensor& x, int64_t d0, int64_t d1) {
  Tensor y = below_autograd([&] { return x.transpose(d0, d1); });
  return record("TransposeBackward0", {x}, y, {}, [d0, d1](C& c) { return Grads{c.grad().transpose(d0, d1)}; });
}
Tensor expand_entry(const Tensor& x, const Shape& sizes) {
  Tensor y = below_autograd([&] { return x.expand(sizes); });
  const Shape in = x.sizes();
  return record("ExpandBackward0", {x}, y, {}, [in](C& c) { return Grads{sum_to(c.grad(), in)}; });
}
Tensor narrow_entry(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Tensor y = below_autograd([&] { return x.narrow(dim, start, length); });
  const Shape in = x.sizes();
  const int64_t d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t s = start < 0 ? start + in[d] : start;
  return record("NarrowBackward0", {x}, y, {}, [in, d, s](C& c) { return Grads{embed_along(c.grad(), in, d, s)}; });
}
Tensor slice_entry(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                   int64_t step) {
  Tensor y = below_autograd([&] { return x.slice(dim, start, end, step); });
  const Shape in = x.sizes();
  const int64_t d = wrap_dim(dim, x.dim(), "slice");
  int64_t s = start.value_or(0);
  if (s < 0) s += in[d];
  s = std::clamp<int64_t>(s, 0, in[d]);
  const int64_t n = y.size(d);
  return record("SliceBackward0", {x}, y, {}, [in, d, s, step, n](C& c) {
    if (step == 1) return Grads{embed_along(c.grad(), in, d, s)};
    Tensor positions = arange(Scalar(s), Scalar(s + n * step), Scalar(step), DType::Int64);
    return Grads{index_add(zeros(in, c.grad().dtype()), d, positions, c.grad())};
  });
}
Tensor select_entry(const Tensor& x, int64_t dim, int64_t index) {
  Tensor y = below_autograd([&] { return x.select(dim, index); });
  const Shape in = x.sizes();
  const int64_t d = wrap_dim(dim, x.dim(), "select");
  const int64_t i = index < 0 ? index + in[d] : index;
  return record("SelectBackward0", {x}, y, {}, [in, d, i](C& c) {
    return Grads{embed_along(c.grad().unsqueeze(d), in, d, i)};
  });
}
Tensor clone_entry(const Tensor& x) {
  Tensor y = below_autograd([&] { return x.clone(); });
  return record("CloneBackward0", {x}, y, {}, [](C& c) { return Grads{c.grad()}; });
}
Tensor to_entry(const Tensor& x, DType dtype) {
  Tensor y = below_autograd([&] { return x.to(dtype); });
  const DType in = x.dtype();
  return record("ToCopyBackward0", {x}, y, {}, [in](C& c) {
    Tensor g = c.grad();
    if (is_complex(g.dtype()) && !is_complex(in)) g = real_part(g);
    return Grads{g.to(in)};
  });
}

// ---------------------------------------------------------------- joining

Tensor cat_entry(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor y = below_autograd([&] { return cat(tensors, dim); });
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.sizes());
  const int64_t d = wrap_dim(dim, y.dim(), "cat");
  return record("CatBackward0", tensors, y, {}, [shapes, d](C& c) {
    Grads out;
    int64_t offset = 0;
    for (const Shape& s : shapes) {
      // PyTorch's legacy rule: 1-D empty inputs take no part.
      if (s.size() == 1 && s[0] == 0 && c.grad().dim() != 1) {
        out.push_back(zeros(s, c.grad().dtype()));
        continue;
      }
      out.push_back(c.grad().narrow(d, offset, s[d]));
      offset += s[d];
    }
    return out;
  });
}
Tensor stack_entry(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor y = below_autograd([&] { return stack(tensors, dim); });
  const int64_t d = wrap_dim(dim, y.dim(), "stack");
  const size_t n = tensors.size();
  return record("StackBackward0", tensors, y, {}, [d, n](C& c) {
    Grads out;
    for (size_t i = 0; i < n; ++i) out.push_back(c.grad().select(d, static_cast<int64_t>(i)));
    return out;
  });
}
Tensor flip_entry(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor y = below_autograd([&] { return flip(x, dims); });
  return record("FlipBackward0", {x}, y, {}, [dims](C& c) { return Grads{flip(c.grad(), dims)}; });
}

// ---------------------------------------------------------------- index ops

Tensor index_select_entry(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = below_autograd([&] { return index_select(x, dim, index); });
  const Shape in = x.sizes();
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "index_select");
  return record("IndexSelectBackward0", {x}, y, {Save::input(index)}, [in, d](C& c) {
    if (in.empty()) return Grads{c.grad().reshape(in)};
    return Grads{index_add(zeros(in, c.grad().dtype()), d, c.saved[0].reshape({-1}), c.grad())};
  });
}
Tensor gather_entry(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = below_autograd([&] { return gather(x, dim, index); });
  const Shape in = x.sizes();
  return record("GatherBackward0", {x}, y, {Save::input(index)}, [in, dim](C& c) {
    return Grads{scatter_add(zeros(in, c.grad().dtype()), dim, c.saved[0], c.grad())};
  });
}
Tensor scatter_add_entry(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor y = below_autograd([&] { return scatter_add(x, dim, index, src); });
  return record("ScatterAddBackward0", {x, src}, y, {Save::input(index)}, [dim](C& c) {
    return Grads{c.grad(), c.needs[1] ? gather(c.grad(), dim, c.saved[0]) : Tensor()};
  });
}
Tensor index_add_entry(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                       const Scalar& alpha) {
  Tensor y = below_autograd([&] { return index_add(x, dim, index, source, alpha); });
  const Shape source_sizes = source.sizes();
  return record("IndexAddBackward0", {x, source}, y, {Save::input(index)}, [dim, alpha, source_sizes](C& c) {
    Tensor gs;
    if (c.needs[1]) {
      gs = c.grad().dim() == 0 ? c.grad() : index_select(c.grad(), dim, c.saved[0].reshape({-1}));
      gs = mul(gs, alpha).reshape(source_sizes);
    }
    return Grads{c.grad(), gs};
  });
}
Tensor embedding_entry(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  Tensor y = below_autograd([&] { return embedding(weight, indices, padding_idx); });
  const Shape in = weight.sizes();
  std::optional<int64_t> pad = padding_idx;
  if (pad && *pad < 0) *pad += in[0];
  return record("EmbeddingBackward0", {weight}, y, {Save::input(indices)}, [in, pad](C& c) {
    Tensor g = c.grad().reshape({-1, in[1]});
    Tensor flat = c.saved[0].reshape({-1});
    // Rows looked up at padding_idx get no gradient (PyTorch).
    if (pad) g = where(eq(flat, Scalar(*pad)).unsqueeze(1), Scalar(0.0), g);
    return Grads{index_add(zeros(in, g.dtype()), 0, flat, g)};
  });
}

// A view entry that also remembers the root it views, for in-place ops on it (inplace.cpp).
template <auto Entry, typename... Args>
Tensor remembered_view(const Tensor& x, Args... args) {
  return as_view_of(x, Entry(x, args...));
}

const bool installed = [] {
  auto& m = autograd_hooks::tensor_method_hooks();
  m.view = remembered_view<view_entry, const Shape&>;
  m.permute = remembered_view<permute_entry, const Shape&>;
  m.transpose = remembered_view<transpose_entry, int64_t, int64_t>;
  m.expand = remembered_view<expand_entry, const Shape&>;
  m.narrow = remembered_view<narrow_entry, int64_t, int64_t, int64_t>;
  m.slice = remembered_view<slice_entry, int64_t, std::optional<int64_t>, std::optional<int64_t>, int64_t>;
  m.select = remembered_view<select_entry, int64_t, int64_t>;
  m.squeeze_all = remembered_view<squeeze_all_entry>;
  m.squeeze = remembered_view<squeeze_entry, int64_t>;
  m.unsqueeze = remembered_view<unsqueeze_entry, int64_t>;
  m.clone = clone_entry;
  m.to = to_entry;
  auto& h = autograd_hooks::op_hooks();
  h.cat = cat_entry;
  h.stack = stack_entry;
  h.flip = flip_entry;
  h.index_select = index_select_entry;
  h.gather = gather_entry;
  h.scatter_add = scatter_add_entry;
  h.index_add = index_add_entry;
  h.embedding = embedding_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
