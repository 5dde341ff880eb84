// Joining/splitting, indexing, matmul and linear.
#include "binding_helpers.h"
#include "kiln/ops/index.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/shape.h"

namespace kiln::python {

void bind_shape_index(py::module_& m) {
  auto cls = tensor_class(m);
  m.def("cat", &cat, py::arg("tensors"), py::arg("dim") = 0);
  m.attr("concat") = m.attr("cat");
  m.def("stack", &stack, py::arg("tensors"), py::arg("dim") = 0);
  def_op(m, "split", [](const Tensor& t, const py::object& size, int64_t dim) {
    if (PyIndex_Check(size.ptr())) return split(t, to_int64(size, "split", "split_size"), dim);
    return split_with_sizes(t, to_shape(size, "split_with_sizes"), dim);
  }, py::arg("tensor"), py::arg("split_size_or_sections"), py::arg("dim") = 0);
  def_op(m, "chunk", &chunk, py::arg("input"), py::arg("chunks"), py::arg("dim") = 0);
  def_op(m, "tensor_split", [](const Tensor& t, const py::object& sections, int64_t dim) {
    if (PyIndex_Check(sections.ptr())) return tensor_split(t, to_int64(sections, "tensor_split", "sections"), dim);
    return tensor_split_indices(t, to_shape(sections, "tensor_split", "index"), dim);
  }, py::arg("input"), py::arg("indices_or_sections"), py::arg("dim") = 0);
  def_op(m, "unbind", &unbind, py::arg("input"), py::arg("dim") = 0);
  def_op(m, "flip", [](const Tensor& t, const py::object& dims) { return flip(t, to_shape(dims, "flip", "dim")); },
         py::arg("input"), py::arg("dims"));

  def_op(m, "index_select", &index_select, py::arg("input"), py::arg("dim"), py::arg("index"));
  def_op(m, "gather", &gather, py::arg("input"), py::arg("dim"), py::arg("index"));
  def_op(m, "scatter_add", &scatter_add, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"));
  cls.def("scatter_add_", &scatter_add_, py::arg("dim"), py::arg("index"), py::arg("src"));
  def_op(m, "index_add", [](const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src, const py::object& alpha) {
    return index_add(t, dim, index, src, to_scalar(alpha, "index_add"));
  }, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1);
  cls.def("index_add_", [](const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src, const py::object& alpha) {
    return index_add_(t, dim, index, src, to_scalar(alpha, "index_add_"));
  }, py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1);
  m.def("embedding", [](const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
    return embedding(weight, input, padding_idx);  // F.embedding(input, weight) order
  }, py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none());
  def_op(m, "masked_fill", [](const Tensor& t, const Tensor& mask, const py::object& value) {
    return is_tensor(value) ? masked_fill(t, mask, value.cast<const Tensor&>()) : masked_fill(t, mask, to_scalar(value, "masked_fill"));
  }, py::arg("input"), py::arg("mask"), py::arg("value"));
  cls.def("masked_fill_", [](const Tensor& t, const Tensor& mask, const py::object& value) {
    return is_tensor(value) ? masked_fill_(t, mask, value.cast<const Tensor&>()) : masked_fill_(t, mask, to_scalar(value, "masked_fill_"));
  }, py::arg("mask"), py::arg("value"));
  def_op(m, "masked_select", &masked_select, py::arg("input"), py::arg("mask"));

  def_op(m, "matmul", &matmul, py::arg("input"), py::arg("other"));
  def_op(m, "mm", &mm, py::arg("input"), py::arg("mat2"));
  def_op(m, "bmm", &bmm, py::arg("input"), py::arg("mat2"));
  def_op(m, "mv", &mv, py::arg("input"), py::arg("vec"));
  def_op(m, "dot", &dot, py::arg("input"), py::arg("other"));
  cls.def("__matmul__", &matmul, py::is_operator());

  m.def("linear", &linear, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("linear_fp8", &linear_fp8, py::arg("input"), py::arg("weight"), py::arg("scale"), py::arg("bias") = py::none(),
        "kiln's weight-only FP8 linear: weight float8_e4m3fn [N, K], scale float32 [N] or [ceil(N/128), ceil(K/128)]");
  m.def("quantize_fp8_rowwise", &quantize_fp8_rowwise, py::arg("weight"));
  m.def("dequantize_fp8", &dequantize_fp8, py::arg("weight"), py::arg("scale"), py::arg("dtype") = DType::Float32);
}

}  // namespace kiln::python
