// Tensor.__getitem__ / __setitem__ with PyTorch's rules, and index_put_ / nonzero.
//
// A key is parsed as PyTorch's applySlicing does: ints, slices, None and `...` are applied
// as views first (an int selects, so it never counts as an advanced index: x[0, :, [1]]
// has shape [3, 1] for x of shape [2, 3, 4], where numpy gives [1, 3]); tensors, lists and
// numpy arrays are recorded as index tensors and applied together by kiln::index /
// kiln::index_put_ (include/kiln/ops/advanced_index.h), which own the broadcasting and
// result-shape rules. A mask covers as many dims as it has (newer PyTorch; 1.13 advanced
// only one dim past a multi-dim mask followed by more indices).
#include <pybind11/stl.h>

#include <limits>
#include <string>

#include "binding_helpers.h"
#include "bindings.h"
#include "kiln/ops/advanced_index.h"
#include "kiln/ops/creation.h"

namespace kiln::python {
namespace {

std::string type_name(const py::handle& obj) { return py::str(obj.get_type().attr("__name__")); }

bool is_mask_dtype(DType t) { return t == DType::Bool || t == DType::UInt8; }

// PyTorch's (and old numpy's) heuristic for a non-tuple key: a short sequence holding a
// sequence, tensor, slice, None or `...` is a tuple of indices (x[[0, slice(None)]] is
// x[0, :]); any other sequence is one index.
bool sequence_as_tuple(const py::handle& key) {
  if (py::isinstance<py::tuple>(key)) return true;
  if (is_tensor(key) || !PySequence_Check(key.ptr())) return false;
  const Py_ssize_t n = PySequence_Size(key.ptr());
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  if (n >= 32) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_GetItem(key.ptr(), i);
    if (item == nullptr) {
      PyErr_Clear();
      return false;
    }
    const py::object obj = py::reinterpret_steal<py::object>(item);
    if (is_tensor(obj) || PySequence_Check(item) || PySlice_Check(item) || item == Py_Ellipsis || item == Py_None) {
      return true;
    }
  }
  return false;
}

// A list, tuple or numpy array used as an index: bool and uint8 data stay masks, anything
// else becomes int64 (PyTorch's indexing_tensor_from_data; floats truncate as there).
Tensor sequence_to_index(const py::handle& seq) {
  Tensor t;
  try {
    t = py::module_::import("kiln").attr("tensor")(seq).cast<Tensor>();
  } catch (py::error_already_set& e) {
    // Ints past int64, strings, ragged nesting: numpy cannot make one array of them.
    throw py::index_error("a " + type_name(seq) + " used as an index must hold integers or booleans of one nested "
                          "shape (" + std::string(e.what()) + ")");
  }
  if (is_complex(t.dtype())) throw py::type_error("'complex' object cannot be interpreted as an integer");
  return is_mask_dtype(t.dtype()) ? t : t.to(DType::Int64);
}

// A list, tuple or numpy array with a length (a 0-dim array has none and is an int).
bool is_sized_sequence(const py::handle& k) {
  if (!PySequence_Check(k.ptr()) || py::isinstance<py::str>(k) || py::isinstance<py::bytes>(k)) return false;
  if (PySequence_Size(k.ptr()) < 0) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// Dims the key names (everything but None, `...` and Python bools); masks count their dims.
int64_t count_specified_dims(const std::vector<py::handle>& items) {
  int64_t count = 0;
  for (const py::handle& k : items) {
    if (is_tensor(k)) {
      const Tensor t = k.cast<Tensor>();
      count += is_mask_dtype(t.dtype()) ? t.dim() : 1;
    } else if (!k.is_none() && k.ptr() != Py_Ellipsis && !py::isinstance<py::bool_>(k)) {
      ++count;
    }
  }
  return count;
}

// The basic part of a key applied as views, and the index tensors it holds, placed so
// kiln::index sees them against the right dims of `view`.
struct SlicedKey {
  Tensor view;
  IndexList indices;
  int64_t covered = 0;  // dims of `view` the entries of `indices` cover

  void record(const Tensor& index, int64_t dim) {
    for (; covered < dim; ++covered) indices.emplace_back();
    indices.emplace_back(index);
    covered += is_mask_dtype(index.dtype()) ? index.dim() : 1;
  }
};

Tensor bool_index(bool keep) { return zeros({keep ? 1 : 0}, DType::Int64); }

Tensor select_checked(const Tensor& t, int64_t dim, const py::handle& k) {
  const int64_t index = to_int64_clamped(k);
  if (index == std::numeric_limits<int64_t>::min() || index == std::numeric_limits<int64_t>::max()) {
    // Past int64 is past every dimension (the clamped value would misreport it).
    throw py::index_error("index " + describe_int(k) + " is out of bounds for dimension " + std::to_string(dim) +
                          " with size " + std::to_string(t.size(dim)));
  }
  return t.select(dim, index);
}

SlicedKey apply_slicing(const Tensor& self, const py::handle& key) {
  std::vector<py::handle> items;
  py::object tuple_key;  // keeps a converted sequence alive while items borrow from it
  if (sequence_as_tuple(key)) {
    tuple_key = py::reinterpret_steal<py::object>(PySequence_Tuple(key.ptr()));
    if (!tuple_key) throw py::error_already_set();
    for (auto k : py::reinterpret_borrow<py::tuple>(tuple_key)) items.push_back(k);
  } else {
    items.push_back(key);
  }
  const int64_t specified = count_specified_dims(items);
  if (specified > self.dim()) {
    throw py::index_error("too many indices for tensor of dimension " + std::to_string(self.dim()));
  }
  int64_t ellipses = 0;
  for (const py::handle& k : items) ellipses += k.ptr() == Py_Ellipsis;
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");

  SlicedKey out{self, {}};
  int64_t dim = 0;
  for (const py::handle& k : items) {
    if (is_tensor(k)) {
      const Tensor t = k.cast<Tensor>();
      if (t.dim() == 0 && is_integral(t.dtype(), true)) {
        if (!is_mask_dtype(t.dtype())) {
          out.view = out.view.select(dim, t.item().to_int64());
        } else {
          out.view = out.view.unsqueeze(dim);
          out.record(bool_index(t.item().to_bool()), dim++);
        }
      } else {
        out.record(t, dim);
        dim += is_mask_dtype(t.dtype()) ? t.dim() : 1;
      }
    } else if (k.is_none()) {
      out.view = out.view.unsqueeze(dim++);
    } else if (k.ptr() == Py_Ellipsis) {
      dim += self.dim() - specified;
    } else if (py::isinstance<py::bool_>(k)) {
      out.view = out.view.unsqueeze(dim);
      out.record(bool_index(k.cast<bool>()), dim++);
    } else if (is_sized_sequence(k)) {
      const Tensor t = sequence_to_index(k);
      out.record(t, dim);
      dim += is_mask_dtype(t.dtype()) ? t.dim() : 1;
    } else if (PyIndex_Check(k.ptr())) {
      out.view = select_checked(out.view, dim, k);
    } else if (py::isinstance<py::slice>(k)) {
      auto sl = py::reinterpret_borrow<py::slice>(k);
      // Bounds past int64 clamp, as Python clamps slice bounds to the sequence.
      auto get = [](py::object o) -> std::optional<int64_t> {
        if (o.is_none()) return std::nullopt;
        return to_int64_clamped(o);
      };
      std::optional<int64_t> step = get(sl.attr("step"));
      if (step && *step <= 0) throw py::value_error("step must be greater than zero");
      out.view = out.view.slice(dim++, get(sl.attr("start")), get(sl.attr("stop")), step.value_or(1));
    } else {
      throw py::index_error("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                            "valid indices (got " + type_name(k) + ")");
    }
  }
  return out;
}

Tensor getitem(const Tensor& self, const py::handle& key) {
  SlicedKey sliced = apply_slicing(self, key);
  if (sliced.indices.empty()) return sliced.view;
  return index(sliced.view, sliced.indices);
}

// Leading size-1 dims of a value are dropped before it is broadcast to the target, as
// PyTorch's setitem does (x[0] = ones(1, 3) works for x of shape [2, 3]).
Tensor strip_leading_ones(const Tensor& value) {
  Shape sizes = value.sizes();
  size_t lead = 0;
  while (lead < sizes.size() && sizes[lead] == 1) ++lead;
  if (lead == 0) return value;
  return value.view(Shape(sizes.begin() + static_cast<std::ptrdiff_t>(lead), sizes.end()));
}

void setitem(const Tensor& self, const py::handle& key, const py::handle& value) {
  const bool number = !is_tensor(value);
  if (number && !(is_python_number(value) || PyIndex_Check(value.ptr()) || py::hasattr(value, "__float__"))) {
    throw py::type_error("can't assign a " + type_name(value) + " to a kiln tensor of dtype " +
                         std::string(dtype_name(self.dtype())) + " (assign a number or a kiln.Tensor)");
  }
  SlicedKey sliced = apply_slicing(self, key);
  if (number) {
    const Scalar s = to_scalar(value, "__setitem__");
    // Either way the number is range-checked as PyTorch does (u8[0] = 300 raises,
    // u8[0] = -1 wraps to 255).
    if (sliced.indices.empty()) {
      sliced.view.fill_(s);
    } else {
      index_put_(sliced.view, sliced.indices, s);
    }
    return;
  }
  const Tensor v = value.cast<Tensor>();
  const Tensor stripped = v.dim() > 0 ? strip_leading_ones(v) : v;
  if (sliced.indices.empty()) {
    sliced.view.copy_(stripped);
  } else {
    index_put_(sliced.view, sliced.indices, stripped, false);
  }
}

// index_put_'s indices: a tuple or list of tensors and Nones.
IndexList to_index_list(const py::handle& indices) {
  if (!py::isinstance<py::tuple>(indices) && !py::isinstance<py::list>(indices)) {
    throw py::type_error("index_put_(): argument 'indices' must be a tuple of Tensors, not " + type_name(indices));
  }
  IndexList out;
  for (auto item : py::reinterpret_borrow<py::sequence>(indices)) {
    if (item.is_none()) {
      out.emplace_back();
    } else if (is_tensor(item)) {
      out.emplace_back(item.cast<Tensor>());
    } else {
      throw py::type_error("index_put_(): expected Tensor or None in 'indices', got " + type_name(item));
    }
  }
  return out;
}

py::object nonzero_py(const Tensor& input, bool as_tuple) {
  if (!as_tuple) return py::cast(nonzero(input));
  // torch.nonzero(as_tuple=True) treats a 0-dim input as 1-D.
  const Tensor coords = nonzero(input.dim() == 0 ? input.reshape({1}) : input);
  py::tuple out(coords.size(1));
  for (int64_t j = 0; j < coords.size(1); ++j) out[j] = py::cast(coords.select(1, j).contiguous());
  return out;
}

}  // namespace

void bind_indexing(py::module_& m) {
  auto cls = tensor_class(m);
  cls.def("__getitem__", &getitem);
  cls.def("__setitem__", &setitem);
  cls.def(
      "index_put_",
      [](const Tensor& self, const py::handle& indices, const Tensor& values, bool accumulate) {
        return index_put_(self, to_index_list(indices), values, accumulate);
      },
      py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  def_op(
      m, "index_put",
      [](const Tensor& self, const py::handle& indices, const Tensor& values, bool accumulate) {
        return index_put(self, to_index_list(indices), values, accumulate);
      },
      py::arg("input"), py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  def_op(m, "nonzero", &nonzero_py, py::arg("input"), py::kw_only(), py::arg("as_tuple") = false);
}

}  // namespace kiln::python
