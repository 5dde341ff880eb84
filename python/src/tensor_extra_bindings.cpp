// repeat, tile, tril/triu, unique, isclose/allclose/equal, any/all, conj and the matrix
// transposes Tensor.mT / mH / H, under PyTorch's names and argument conventions.
#include "binding_helpers.h"
#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/ops/compare.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/unique.h"

namespace kiln::python {
namespace {

// x.repeat(2, 3) and x.repeat((2, 3)) both mean [2, 3], as in PyTorch.
std::vector<int64_t> counts_args(const py::args& args, const char* op) {
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) return to_shape(args[0], op, "repeats");
  return to_shape(args, op, "repeats");
}

// torch.unique's return: the values alone, or a tuple with the asked-for extras in
// PyTorch's order (values, inverse_indices, counts).
py::object unique_return(const UniqueResult& r, bool return_inverse, bool return_counts) {
  if (!return_inverse && !return_counts) return py::cast(r.values);
  py::list out;
  out.append(r.values);
  if (return_inverse) out.append(r.inverse_indices);
  if (return_counts) out.append(r.counts);
  return py::tuple(out);
}

std::optional<int64_t> opt_dim(const py::object& dim, const char* op) {
  if (dim.is_none()) return std::nullopt;
  return to_int64(dim, op, "dim");
}

// PyTorch's Tensor.mT / mH: the last two dims swapped; a 0-dim tensor is its own (for mH
// its conjugate); a 1-D one is an error.
Tensor matrix_adjoint(const Tensor& t, bool conjugate, const char* name) {
  KILN_CHECK(t.dim() != 1, name, "tensor.{} is only supported on matrices or batches of matrices. Got 1-D tensor.",
             name);
  const Tensor swapped = t.dim() == 0 ? t : t.transpose(-2, -1);
  return conjugate ? autograd::conj(swapped) : swapped;
}

}  // namespace

void bind_tensor_extra(py::module_& m) {
  auto cls = tensor_class(m);
  cls.def("repeat", [](const Tensor& t, const py::args& a) { return repeat(t, counts_args(a, "repeat")); });
  m.def("tile", [](const Tensor& t, const py::object& dims) { return tile(t, to_shape(dims, "tile", "dims")); },
        py::arg("input"), py::arg("dims"));
  cls.def("tile", [](const Tensor& t, const py::args& a) { return tile(t, counts_args(a, "tile")); });
  def_op(m, "tril", &tril, py::arg("input"), py::arg("diagonal") = 0);
  def_op(m, "triu", &triu, py::arg("input"), py::arg("diagonal") = 0);
  cls.def("tril_", &tril_, py::arg("diagonal") = 0);
  cls.def("triu_", &triu_, py::arg("diagonal") = 0);

  def_op(m, "unique", [](const Tensor& t, bool sorted, bool return_inverse, bool return_counts, const py::object& dim) {
    return unique_return(unique(t, sorted, return_inverse, return_counts, opt_dim(dim, "unique")), return_inverse,
                         return_counts);
  }, py::arg("input"), py::arg("sorted") = true, py::arg("return_inverse") = false, py::arg("return_counts") = false,
         py::arg("dim") = py::none());
  def_op(m, "unique_consecutive", [](const Tensor& t, bool return_inverse, bool return_counts, const py::object& dim) {
    return unique_return(unique_consecutive(t, return_inverse, return_counts, opt_dim(dim, "unique_consecutive")),
                         return_inverse, return_counts);
  }, py::arg("input"), py::arg("return_inverse") = false, py::arg("return_counts") = false,
         py::arg("dim") = py::none());

  def_op(m, "isclose", &isclose, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-05,
         py::arg("atol") = 1e-08, py::arg("equal_nan") = false);
  def_op(m, "allclose", &allclose, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-05,
         py::arg("atol") = 1e-08, py::arg("equal_nan") = false);
  def_op(m, "equal", &equal, py::arg("input"), py::arg("other"));

  using LogicalFn = Tensor (*)(const Tensor&, const DimList&, bool);
  for (auto [name, fn] : {std::pair<const char*, LogicalFn>{"any", &any}, {"all", &all}}) {
    def_op(m, name, [fn, op = name](const Tensor& t, const py::object& dim, bool keepdim) {
      // dim=None reduces every dim; an empty tuple too (PyTorch 2's dim=()).
      return fn(t, to_dims(dim, op), keepdim);
    }, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }

  def_op(m, "conj", &autograd::conj, py::arg("input"));
  cls.def_property_readonly("mT", [](const Tensor& t) { return matrix_adjoint(t, false, "mT"); })
      .def_property_readonly("mH", [](const Tensor& t) { return matrix_adjoint(t, true, "mH"); })
      .def("adjoint", [](const Tensor& t) { return matrix_adjoint(t, true, "adjoint"); })
      .def_property_readonly("H", [](const Tensor& t) {
        KILN_CHECK(t.dim() == 2 || t.dim() == 0, "H",
                   "tensor.H is only supported on matrices (2-D tensors). Got {}-D tensor.{}", t.dim(),
                   t.dim() > 2 ? " For batches of matrices, consider using tensor.mH" : "");
        return t.dim() == 0 ? t : autograd::conj(t.transpose(0, 1));
      });
}

}  // namespace kiln::python
