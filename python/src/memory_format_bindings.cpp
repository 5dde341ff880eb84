// kiln.memory_format (torch.memory_format) and its four values, kiln.contiguous_format,
// kiln.channels_last, kiln.channels_last_3d and kiln.preserve_format. The Tensor methods
// and *_like ops that take one are bound with their families; this file registers the
// type first so that they can name it as a default.
#include <string>

#include "bindings.h"

namespace kiln::python {

void bind_memory_format(py::module_& m) {
  py::enum_<MemoryFormat> cls(m, "memory_format",
                              "The order a dense tensor keeps its elements in (torch.memory_format)");
  cls.value("contiguous_format", MemoryFormat::Contiguous)
      .value("channels_last", MemoryFormat::ChannelsLast)
      .value("channels_last_3d", MemoryFormat::ChannelsLast3d)
      .value("preserve_format", MemoryFormat::Preserve)
      .export_values();
  // Replaced rather than overloaded: the enum's own __repr__ would be found first.
  const auto name = [](MemoryFormat f) { return "kiln." + std::string(memory_format_name(f)); };
  cls.attr("__repr__") = py::cpp_function(name, py::name("__repr__"), py::is_method(cls));
  cls.attr("__str__") = py::cpp_function(name, py::name("__str__"), py::is_method(cls));
}

}  // namespace kiln::python
