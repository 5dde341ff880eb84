// Reductions, scans, sort and topk under PyTorch's names and argument conventions.
#include "binding_helpers.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"

namespace kiln::python {
namespace {

// (values, indices) as a named tuple, like torch.return_types.
py::object values_indices(const ValuesIndices& r) {
  static py::object* type = new py::object(
      py::module_::import("collections").attr("namedtuple")("return_types", py::make_tuple("values", "indices")));
  return (*type)(r.values, r.indices);
}

}  // namespace

void bind_reduce(py::module_& m) {
  using DimFn = Tensor (*)(const Tensor&, const DimList&, bool, std::optional<DType>);
  for (auto [name, fn] : {std::pair<const char*, DimFn>{"sum", &sum}, {"mean", &mean}, {"prod", &prod}}) {
    def_op(m, name, [fn, op = name](const Tensor& t, const py::object& dim, bool keepdim, const py::object& dtype) {
      return fn(t, to_dims(dim, op), keepdim, to_opt_dtype(dtype));
    }, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
       py::arg("dtype") = py::none());
  }
  using MinMaxFn = Tensor (*)(const Tensor&, const DimList&, bool);
  for (auto [name, fn] : {std::pair<const char*, MinMaxFn>{"amax", &amax}, {"amin", &amin}}) {
    def_op(m, name, [fn, op = name](const Tensor& t, const py::object& dim, bool keepdim) {
      return fn(t, to_dims(dim, op), keepdim);
    },
           py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  // max(input) | max(input, dim, keepdim) -> (values, indices) | max(input, other) -> maximum.
  def_op(m, "max", [](const Tensor& t, const py::object& dim, bool keepdim) -> py::object {
    if (dim.is_none()) return py::cast(max(t));
    if (is_tensor(dim)) return py::cast(maximum(t, dim.cast<const Tensor&>()));
    return values_indices(max(t, to_int64(dim, "max", "dim"), keepdim));
  }, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, "min", [](const Tensor& t, const py::object& dim, bool keepdim) -> py::object {
    if (dim.is_none()) return py::cast(min(t));
    if (is_tensor(dim)) return py::cast(minimum(t, dim.cast<const Tensor&>()));
    return values_indices(min(t, to_int64(dim, "min", "dim"), keepdim));
  }, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, "argmax", [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) { return argmax(t, dim, keepdim); },
         py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, "argmin", [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) { return argmin(t, dim, keepdim); },
         py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  using VarFn = Tensor (*)(const Tensor&, const DimList&, double, bool);
  for (auto [name, fn] : {std::pair<const char*, VarFn>{"var", &var}, {"std", &kiln::std}}) {
    def_op(m, name, [fn, op = name](const Tensor& t, const py::object& dim, const py::object& correction,
                                    bool keepdim, const py::object& unbiased) {
      double c = 1.0;
      if (!correction.is_none()) c = to_double(correction, op, "correction");
      if (!unbiased.is_none()) c = unbiased.cast<bool>() ? 1.0 : 0.0;
      return fn(t, to_dims(dim, op), c, keepdim);
    }, py::arg("input"), py::arg("dim") = py::none(), py::kw_only(), py::arg("correction") = py::none(),
       py::arg("keepdim") = false, py::arg("unbiased") = py::none());
  }
  def_op(m, "norm", [](const Tensor& t, const py::object& p, const py::object& dim, bool keepdim) {
    double order = 2.0;
    if (py::isinstance<py::str>(p)) {
      std::string s = p.cast<std::string>();
      if (s != "fro") throw py::value_error("norm: only p='fro' is supported among string orders, got '" + s + "'");
    } else if (!p.is_none()) {
      order = to_double(p, "norm", "p");
    }
    return norm(t, order, to_dims(dim, "norm"), keepdim);
  }, py::arg("input"), py::arg("p") = "fro", py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, "cumsum", [](const Tensor& t, int64_t dim, const py::object& dtype) {
    return cumsum(t, dim, to_opt_dtype(dtype));
  }, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  def_op(m, "sort", [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    return values_indices(sort(t, dim, descending, stable));
  }, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = false);
  def_op(m, "argsort", [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    return argsort(t, dim, descending, stable);
  }, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = false);
  def_op(m, "topk", [](const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted) {
    return values_indices(topk(t, k, dim, largest, sorted));
  }, py::arg("input"), py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true);
}

}  // namespace kiln::python
