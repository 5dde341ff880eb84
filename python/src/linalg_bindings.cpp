// kiln.linalg: torch.linalg's functions with its keyword-only arguments, named-tuple
// results and kiln.linalg.LinAlgError (a RuntimeError subclass, as torch's).
#include <pybind11/stl.h>

#include "binding_helpers.h"
#include "bindings.h"
#include "kiln/ops/linalg.h"

namespace kiln::python {
namespace {

namespace la = kiln::linalg;

// A collections.namedtuple class, made once per result kind.
py::object named_tuple(const char* name, std::initializer_list<const char*> fields) {
  py::list names;
  for (const char* f : fields) names.append(f);
  return py::module_::import("collections").attr("namedtuple")(name, names);
}

std::optional<Tensor> tolerance(const py::object& value, const char* name) {
  if (value.is_none()) return std::nullopt;
  if (is_tensor(value)) return value.cast<Tensor>();
  return scalar_tensor(Scalar(to_double(value, "linalg.pinv", name)), DType::Float64);
}

void refuse_driver(const py::object& driver, const char* op) {
  if (!driver.is_none()) {
    throw Error(ErrorKind::Runtime, std::string(op) +
                                        ": keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                                        "backend.");
  }
}

}  // namespace

void bind_linalg(py::module_& parent) {
  py::module_ m = parent.def_submodule("linalg", "torch.linalg's functions for float32/float64/complex64/complex128");

  static py::exception<la::LinAlgError> linalg_error(m, "LinAlgError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const la::LinAlgError& e) {
      PyErr_SetString(linalg_error.ptr(), e.what());
    }
  });

  // Kept alive by the module: the classes are attributes of it.
  m.attr("_lu_factor") = named_tuple("linalg_lu_factor", {"LU", "pivots"});
  m.attr("_lu_factor_ex") = named_tuple("linalg_lu_factor_ex", {"LU", "pivots", "info"});
  m.attr("_lu") = named_tuple("linalg_lu", {"P", "L", "U"});
  m.attr("_solve_ex") = named_tuple("linalg_solve_ex", {"result", "info"});
  m.attr("_slogdet") = named_tuple("linalg_slogdet", {"sign", "logabsdet"});
  m.attr("_inv_ex") = named_tuple("linalg_inv_ex", {"inverse", "info"});
  m.attr("_cholesky_ex") = named_tuple("linalg_cholesky_ex", {"L", "info"});
  m.attr("_qr") = named_tuple("linalg_qr", {"Q", "R"});
  m.attr("_svd") = named_tuple("linalg_svd", {"U", "S", "Vh"});
  m.attr("_eigh") = named_tuple("linalg_eigh", {"eigenvalues", "eigenvectors"});
  m.attr("_lstsq") = named_tuple("linalg_lstsq", {"solution", "residuals", "rank", "singular_values"});
  auto make = [m](const char* kind, auto&&... values) {
    return m.attr(kind)(py::cast(values)...);
  };

  m.def("solve_triangular", &la::solve_triangular, py::arg("A"), py::arg("B"), py::kw_only(), py::arg("upper"),
        py::arg("left") = true, py::arg("unitriangular") = false);
  m.def(
      "lu_factor",
      [make](const Tensor& A, bool pivot) {
        auto r = la::lu_factor(A, pivot);
        return make("_lu_factor", r.LU, r.pivots);
      },
      py::arg("A"), py::kw_only(), py::arg("pivot") = true);
  m.def(
      "lu_factor_ex",
      [make](const Tensor& A, bool pivot, bool check_errors) {
        auto r = la::lu_factor_ex(A, pivot, check_errors);
        return make("_lu_factor_ex", r.LU, r.pivots, r.info);
      },
      py::arg("A"), py::kw_only(), py::arg("pivot") = true, py::arg("check_errors") = false);
  m.def(
      "lu",
      [make](const Tensor& A, bool pivot) {
        auto r = la::lu(A, pivot);
        return make("_lu", r.P, r.L, r.U);
      },
      py::arg("A"), py::kw_only(), py::arg("pivot") = true);
  m.def("lu_solve", &la::lu_solve, py::arg("LU"), py::arg("pivots"), py::arg("B"), py::kw_only(),
        py::arg("left") = true, py::arg("adjoint") = false);
  m.def("solve", &la::solve, py::arg("A"), py::arg("B"), py::kw_only(), py::arg("left") = true);
  m.def(
      "solve_ex",
      [make](const Tensor& A, const Tensor& B, bool left, bool check_errors) {
        auto r = la::solve_ex(A, B, left, check_errors);
        return make("_solve_ex", r.result, r.info);
      },
      py::arg("A"), py::arg("B"), py::kw_only(), py::arg("left") = true, py::arg("check_errors") = false);
  m.def("det", &la::det, py::arg("A"));
  m.def(
      "slogdet",
      [make](const Tensor& A) {
        auto r = la::slogdet(A);
        return make("_slogdet", r.sign, r.logabsdet);
      },
      py::arg("A"));
  m.def("inv", &la::inv, py::arg("A"));
  m.def(
      "inv_ex",
      [make](const Tensor& A, bool check_errors) {
        auto r = la::inv_ex(A, check_errors);
        return make("_inv_ex", r.inverse, r.info);
      },
      py::arg("A"), py::kw_only(), py::arg("check_errors") = false);
  m.def("cholesky", &la::cholesky, py::arg("A"), py::kw_only(), py::arg("upper") = false);
  m.def(
      "cholesky_ex",
      [make](const Tensor& A, bool upper, bool check_errors) {
        auto r = la::cholesky_ex(A, upper, check_errors);
        return make("_cholesky_ex", r.L, r.info);
      },
      py::arg("A"), py::kw_only(), py::arg("upper") = false, py::arg("check_errors") = false);
  m.def(
      "qr",
      [make](const Tensor& A, const std::string& mode) {
        auto r = la::qr(A, mode);
        return make("_qr", r.Q, r.R);
      },
      py::arg("A"), py::arg("mode") = "reduced");
  m.def(
      "svd",
      [make](const Tensor& A, bool full_matrices, const py::object& driver) {
        refuse_driver(driver, "torch.linalg.svd");
        auto r = la::svd(A, full_matrices);
        return make("_svd", r.U, r.S, r.Vh);
      },
      py::arg("A"), py::arg("full_matrices") = true, py::kw_only(), py::arg("driver") = py::none());
  m.def(
      "svdvals",
      [](const Tensor& A, const py::object& driver) {
        refuse_driver(driver, "torch.linalg.svdvals");
        return la::svdvals(A);
      },
      py::arg("A"), py::kw_only(), py::arg("driver") = py::none());
  m.def(
      "eigh",
      [make](const Tensor& A, const std::string& UPLO) {
        auto r = la::eigh(A, UPLO);
        return make("_eigh", r.eigenvalues, r.eigenvectors);
      },
      py::arg("A"), py::arg("UPLO") = "L");
  m.def(
      "eigvalsh", [](const Tensor& A, const std::string& UPLO) { return la::eigvalsh(A, UPLO); }, py::arg("A"),
      py::arg("UPLO") = "L");
  m.def(
      "pinv",
      [](const Tensor& A, const py::object& atol, const py::object& rtol, bool hermitian) {
        return la::pinv(A, tolerance(atol, "atol"), tolerance(rtol, "rtol"), hermitian);
      },
      py::arg("A"), py::kw_only(), py::arg("atol") = py::none(), py::arg("rtol") = py::none(),
      py::arg("hermitian") = false);
  m.def(
      "lstsq",
      [make](const Tensor& A, const Tensor& B, std::optional<double> rcond, std::optional<std::string> driver) {
        std::optional<std::string_view> d;
        if (driver) d = *driver;
        auto r = la::lstsq(A, B, rcond, d);
        return make("_lstsq", r.solution, r.residuals, r.rank, r.singular_values);
      },
      py::arg("A"), py::arg("B"), py::arg("rcond") = py::none(), py::kw_only(), py::arg("driver") = py::none());
}

}  // namespace kiln::python
