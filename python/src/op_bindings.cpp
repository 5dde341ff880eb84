// Op families under PyTorch's names. Each family registers itself here.
#include "bindings.h"

namespace kiln::python {

void bind_elementwise(py::module_& m);
void bind_reduce(py::module_& m);
void bind_shape_index(py::module_& m);
void bind_nn(py::module_& m);
void bind_matmul_family(py::module_& m);
void bind_gated_delta(py::module_& m);

void bind_ops(py::module_& m) {
  bind_elementwise(m);
  bind_reduce(m);
  bind_shape_index(m);
  bind_nn(m);
  bind_matmul_family(m);
  bind_gated_delta(m);
}

}  // namespace kiln::python
