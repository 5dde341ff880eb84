// Elementwise ops and Tensor's arithmetic operators.
#include <pybind11/operators.h>

#include "binding_helpers.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::python {
namespace {

using TensorTensorFn = Tensor (*)(const Tensor&, const Tensor&);
using TensorScalarFn = Tensor (*)(const Tensor&, const Scalar&);

using WrapFn = Tensor (*)(const py::handle&, const Tensor&, std::string_view);

// op(number, tensor) through a tensor-tensor op. A 0-dim `other` promotes with the
// wrapped number as with any 0-dim tensor, so a number held in float32 (the compute
// dtype of a bfloat16 or float16 result) would make 1.5 - bf16_scalar float32; in
// PyTorch the number never decides the dtype, so the float32 result is rounded once.
template <typename Op>
Tensor number_first(const py::handle& number, const Tensor& other, WrapFn wrap, std::string_view name, Op&& op) {
  const Tensor wrapped = wrap(number, other, name);
  Tensor out = op(wrapped, other);
  const DType want = result_type({other, to_scalar(number, name)});
  if (other.dim() == 0 && out.dtype() == wrapped.dtype() && is_floating(want) && want != wrapped.dtype()) {
    out = out.to(want);
  }
  return out;
}

// A binary op taking tensors or numbers on either side, as torch.<op> does.
struct Binary {
  const char* name;  // for errors about a number operand
  TensorTensorFn tt;
  TensorScalarFn ts;
  bool commutative;
  // How a number on the left becomes a tensor (true division computes in float).
  WrapFn wrap = &wrap_number;

  Tensor operator()(const py::object& a, const py::object& b) const {
    if (is_tensor(a)) {
      const Tensor& ta = a.cast<const Tensor&>();
      if (is_tensor(b)) return tt(ta, b.cast<const Tensor&>());
      return ts(ta, to_scalar(b, name));
    }
    if (!is_tensor(b)) throw py::type_error("expected at least one tensor argument");
    const Tensor& tb = b.cast<const Tensor&>();
    if (commutative) return ts(tb, to_scalar(a, name));
    return number_first(a, tb, wrap, name, tt);
  }
};

// Tensor dunders return NotImplemented for operands that are neither tensors nor
// numbers, so Python can try the other side.
py::object dunder(const Binary& op, const py::object& self, const py::object& other, bool reflected) {
  if (!is_tensor(other) && !is_python_number(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::cast(reflected ? op(other, self) : op(self, other));
}

template <typename TT, typename TS>
Binary make(const char* name, TT tt, TS ts, bool commutative) {
  return Binary{name, static_cast<TensorTensorFn>(tt), static_cast<TensorScalarFn>(ts), commutative};
}

}  // namespace

void bind_elementwise(py::module_& m) {
  auto cls = tensor_class(m);
  const Binary mul_op = make<TensorTensorFn, TensorScalarFn>("mul", &mul, &mul, true);
  const Binary eq_op = make<TensorTensorFn, TensorScalarFn>("eq", &eq, &eq, true);
  const Binary ne_op = make<TensorTensorFn, TensorScalarFn>("ne", &ne, &ne, true);
  const Binary lt_op = make<TensorTensorFn, TensorScalarFn>("lt", &lt, &lt, false);
  const Binary le_op = make<TensorTensorFn, TensorScalarFn>("le", &le, &le, false);
  const Binary gt_op = make<TensorTensorFn, TensorScalarFn>("gt", &gt, &gt, false);
  const Binary ge_op = make<TensorTensorFn, TensorScalarFn>("ge", &ge, &ge, false);
  const Binary and_op = make<TensorTensorFn, TensorScalarFn>("bitwise_and", &bitwise_and, &bitwise_and, true);
  const Binary or_op = make<TensorTensorFn, TensorScalarFn>("bitwise_or", &bitwise_or, &bitwise_or, true);
  const Binary xor_op = make<TensorTensorFn, TensorScalarFn>("bitwise_xor", &bitwise_xor, &bitwise_xor, true);
  const Binary shl_op = make<TensorTensorFn, TensorScalarFn>("bitwise_left_shift", &bitwise_left_shift, &bitwise_left_shift, false);
  const Binary shr_op = make<TensorTensorFn, TensorScalarFn>("bitwise_right_shift", &bitwise_right_shift, &bitwise_right_shift, false);
  const Binary rem_op = make<TensorTensorFn, TensorScalarFn>("remainder", &remainder, &remainder, false);
  const Binary pow_op = make<TensorTensorFn, TensorScalarFn>("pow", &pow, &pow, false);
  const Binary add_op{"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
                      [](const Tensor& a, const Scalar& b) { return add(a, b); }, true};
  const Binary sub_op{"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
                      [](const Tensor& a, const Scalar& b) { return sub(a, b); }, false};
  const Binary div_op{"div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
                      [](const Tensor& a, const Scalar& b) { return div(a, b); }, false, &wrap_dividend};
  const Binary floordiv_op{"div", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); },
                           [](const Tensor& a, const Scalar& b) { return div(a, b, "floor"); }, false};

  struct Named { const char* name; Binary op; };
  for (const Named& n : {Named{"mul", mul_op}, Named{"multiply", mul_op}, Named{"eq", eq_op}, Named{"ne", ne_op},
                         Named{"lt", lt_op}, Named{"le", le_op}, Named{"gt", gt_op}, Named{"ge", ge_op},
                         Named{"less", lt_op}, Named{"greater", gt_op}, Named{"bitwise_and", and_op},
                         Named{"bitwise_or", or_op}, Named{"bitwise_xor", xor_op},
                         Named{"bitwise_left_shift", shl_op}, Named{"bitwise_right_shift", shr_op},
                         Named{"remainder", rem_op}, Named{"pow", pow_op}, Named{"true_divide", div_op},
                         Named{"floor_divide", floordiv_op}}) {
    Binary op = n.op;
    def_op(m, n.name, [op](const py::object& a, const py::object& b) { return op(a, b); });
  }
  // add/sub with alpha, div with rounding_mode.
  def_op(m, "add", [add_op](const py::object& a, const py::object& b, const py::object& alpha) {
    if (alpha.is_none()) return add_op(a, b);
    if (!is_tensor(a)) throw py::type_error("add: with alpha, input must be a tensor");
    const Tensor& ta = a.cast<const Tensor&>();
    return is_tensor(b) ? add(ta, b.cast<const Tensor&>(), to_scalar(alpha, "add")) : add(ta, to_scalar(b, "add"), to_scalar(alpha, "add"));
  }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = py::none());
  def_op(m, "sub", [sub_op](const py::object& a, const py::object& b, const py::object& alpha) {
    if (alpha.is_none()) return sub_op(a, b);
    if (!is_tensor(a)) throw py::type_error("sub: with alpha, input must be a tensor");
    const Tensor& ta = a.cast<const Tensor&>();
    return is_tensor(b) ? sub(ta, b.cast<const Tensor&>(), to_scalar(alpha, "sub")) : sub(ta, to_scalar(b, "sub"), to_scalar(alpha, "sub"));
  }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("alpha") = py::none());
  def_op(m, "div", [](const py::object& a, const py::object& b, std::optional<std::string> mode) {
    std::optional<std::string_view> rm;
    if (mode) rm = *mode;
    if (!is_tensor(a)) {
      const auto divide = [rm](const Tensor& x, const Tensor& y) { return div(x, y, rm); };
      return number_first(a, b.cast<const Tensor&>(), mode ? &wrap_number : &wrap_dividend, "div", divide);
    }
    const Tensor& ta = a.cast<const Tensor&>();
    return is_tensor(b) ? div(ta, b.cast<const Tensor&>(), rm) : div(ta, to_scalar(b, "div"), rm);
  }, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  m.attr("divide") = m.attr("div");

  for (auto [name, fn] : {std::pair{"maximum", &maximum}, std::pair{"minimum", &minimum}, std::pair{"atan2", &atan2},
                          std::pair{"logical_and", &logical_and}, std::pair{"logical_or", &logical_or},
                          std::pair{"logical_xor", &logical_xor}}) {
    def_op(m, name, fn);
  }

  using Unary = Tensor (*)(const Tensor&);
  const std::pair<const char*, Unary> unary[] = {
      {"abs", &abs}, {"neg", &neg}, {"negative", &neg}, {"sign", &sign}, {"square", &square}, {"exp", &exp},
      {"exp2", &exp2}, {"expm1", &expm1}, {"log", &log}, {"log2", &log2}, {"log1p", &log1p}, {"sqrt", &sqrt},
      {"rsqrt", &rsqrt}, {"reciprocal", &reciprocal}, {"sin", &sin}, {"cos", &cos}, {"tanh", &tanh},
      {"sigmoid", &sigmoid}, {"silu", &silu}, {"relu", &relu}, {"floor", &floor}, {"ceil", &ceil},
      {"round", &round}, {"trunc", &trunc}, {"isnan", &isnan}, {"isinf", &isinf}, {"isfinite", &isfinite},
      {"logical_not", &logical_not}, {"bitwise_not", &bitwise_not}};
  for (const auto& [name, fn] : unary) def_op(m, name, fn);
  def_op(m, "gelu", [](const Tensor& x, const std::string& approximate) { return gelu(x, approximate); },
         py::arg("input"), py::kw_only(), py::arg("approximate") = "none");
  def_op(m, "softplus", [](const Tensor& x, const py::object& beta, const py::object& threshold) {
    return softplus(x, to_scalar(beta, "softplus"), to_scalar(threshold, "softplus"));
  }, py::arg("input"), py::arg("beta") = 1, py::arg("threshold") = 20);

  def_op(m, "where", [](const Tensor& cond, const py::object& a, const py::object& b) {
    if (is_tensor(a) && is_tensor(b)) return where(cond, a.cast<const Tensor&>(), b.cast<const Tensor&>());
    if (is_tensor(a)) return where(cond, a.cast<const Tensor&>(), to_scalar(b, "where"));
    if (is_tensor(b)) return where(cond, to_scalar(a, "where"), b.cast<const Tensor&>());
    return where(cond, to_scalar(a, "where"), to_scalar(b, "where"));
  }, py::arg("condition"), py::arg("input"), py::arg("other"));
  def_op(m, "clamp", [](const Tensor& x, const py::object& lo, const py::object& hi) {
    if (is_tensor(lo) || is_tensor(hi)) {
      // A number beside a tensor bound becomes a 0-dim tensor that promotes as the number.
      auto opt = [&x](const py::object& o) -> std::optional<Tensor> {
        if (o.is_none()) return std::nullopt;
        if (is_tensor(o)) return o.cast<Tensor>();
        return wrap_number(o, x, "clamp");
      };
      return clamp(x, opt(lo), opt(hi));
    }
    auto opt = [](const py::object& o) -> std::optional<Scalar> {
      if (o.is_none()) return std::nullopt;
      return to_scalar(o, "clamp");
    };
    return clamp(x, opt(lo), opt(hi));
  }, py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
  m.attr("clip") = m.attr("clamp");

  // Operators.
  struct Dunder { const char* name; Binary op; bool reflected; };
  for (const Dunder& d : {Dunder{"__add__", add_op, false}, Dunder{"__radd__", add_op, true},
                          Dunder{"__sub__", sub_op, false}, Dunder{"__rsub__", sub_op, true},
                          Dunder{"__mul__", mul_op, false}, Dunder{"__rmul__", mul_op, true},
                          Dunder{"__truediv__", div_op, false}, Dunder{"__rtruediv__", div_op, true},
                          Dunder{"__floordiv__", floordiv_op, false}, Dunder{"__rfloordiv__", floordiv_op, true},
                          Dunder{"__mod__", rem_op, false}, Dunder{"__rmod__", rem_op, true},
                          Dunder{"__pow__", pow_op, false}, Dunder{"__rpow__", pow_op, true},
                          Dunder{"__eq__", eq_op, false}, Dunder{"__ne__", ne_op, false},
                          Dunder{"__lt__", lt_op, false}, Dunder{"__le__", le_op, false},
                          Dunder{"__gt__", gt_op, false}, Dunder{"__ge__", ge_op, false},
                          Dunder{"__and__", and_op, false}, Dunder{"__rand__", and_op, true},
                          Dunder{"__or__", or_op, false}, Dunder{"__ror__", or_op, true},
                          Dunder{"__xor__", xor_op, false}, Dunder{"__rxor__", xor_op, true},
                          Dunder{"__lshift__", shl_op, false}, Dunder{"__rshift__", shr_op, false}}) {
    Binary op = d.op;
    bool reflected = d.reflected;
    cls.def(d.name, [op, reflected](const py::object& self, const py::object& other) {
      return dunder(op, self, other, reflected);
    }, py::is_operator());
  }
  // Defining __eq__ drops the default hash; tensors hash by identity as in PyTorch.
  cls.def("__hash__", [](const py::object& self) { return py::hash(py::int_(reinterpret_cast<uintptr_t>(self.ptr()))); });
  cls.def("__neg__", [](const Tensor& t) { return neg(t); });
  cls.def("__abs__", [](const Tensor& t) { return abs(t); });
  cls.def("__invert__", [](const Tensor& t) {
    return t.dtype() == DType::Bool ? logical_not(t) : bitwise_not(t);
  });
  // In-place arithmetic writes into self (error when the result type can't be stored there).
  cls.def("__iadd__", [](Tensor& t, const py::object& o) -> Tensor& {
    return is_tensor(o) ? add_(t, o.cast<const Tensor&>()) : add_(t, to_scalar(o, "add_"));
  });
  cls.def("__isub__", [](Tensor& t, const py::object& o) -> Tensor& {
    return is_tensor(o) ? sub_(t, o.cast<const Tensor&>()) : sub_(t, to_scalar(o, "sub_"));
  });
  cls.def("__imul__", [](Tensor& t, const py::object& o) -> Tensor& {
    return is_tensor(o) ? mul_(t, o.cast<const Tensor&>()) : mul_(t, to_scalar(o, "mul_"));
  });
  cls.def("__itruediv__", [](Tensor& t, const py::object& o) -> Tensor& {
    return is_tensor(o) ? div_(t, o.cast<const Tensor&>()) : div_(t, to_scalar(o, "div_"));
  });
  cls.def("add_", [](Tensor& t, const py::object& o, const py::object& alpha) -> Tensor& {
    Scalar a = alpha.is_none() ? Scalar(int64_t{1}) : to_scalar(alpha, "add_");
    return is_tensor(o) ? add_(t, o.cast<const Tensor&>(), a) : add_(t, to_scalar(o, "add_"), a);
  }, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none());
  cls.def("mul_", [](Tensor& t, const py::object& o) -> Tensor& {
    return is_tensor(o) ? mul_(t, o.cast<const Tensor&>()) : mul_(t, to_scalar(o, "mul_"));
  });
  cls.def("sub_", [](Tensor& t, const py::object& o, const py::object& alpha) -> Tensor& {
    Scalar a = alpha.is_none() ? Scalar(int64_t{1}) : to_scalar(alpha, "sub_");
    return is_tensor(o) ? sub_(t, o.cast<const Tensor&>(), a) : sub_(t, to_scalar(o, "sub_"), a);
  }, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none());
  cls.def("div_", [](Tensor& t, const py::object& o, std::optional<std::string> mode) -> Tensor& {
    std::optional<std::string_view> rm;
    if (mode) rm = *mode;
    return is_tensor(o) ? div_(t, o.cast<const Tensor&>(), rm) : div_(t, to_scalar(o, "div_"), rm);
  }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
}

}  // namespace kiln::python
