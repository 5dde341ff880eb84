// Op families under PyTorch's names. Each family registers itself here.
#include "bindings.h"

namespace kiln::python {

void bind_ops(py::module_& m) {}

}  // namespace kiln::python
