// kiln.load_safetensors / kiln.save_safetensors: the `safetensors` package's
// load_file / save_file (safetensors.torch) for kiln tensors, on kiln/safetensors.h.
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "bindings.h"
#include "kiln/safetensors.h"

namespace kiln::python {

namespace {

// A str or os.PathLike, as open() takes.
std::string path_arg(const py::handle& obj, const char* op) {
  py::object path = py::module_::import("os").attr("fspath")(obj);
  if (!py::isinstance<py::str>(path)) {
    throw py::type_error(std::string(op) + ": filename must be a str or os.PathLike giving a str, got bytes");
  }
  return path.cast<std::string>();
}

}  // namespace

void bind_safetensors(py::module_& m) {
  m.def(
      "load_safetensors",
      [](const py::object& filename, const py::object& device) {
        const std::string path = path_arg(filename, "load_safetensors");
        SafetensorsFile file;
        {
          py::gil_scoped_release release;  // reading a large file needs no Python
          file = load_safetensors(path);
        }
        py::dict out;
        const bool on_cpu = device.is_none() || py::str(device).cast<std::string>() == "cpu";
        for (auto& [name, t] : file.tensors) {
          py::object value = py::cast(std::move(t));
          out[py::str(name)] = on_cpu ? value : value.attr("to")(device);
        }
        return out;
      },
      py::arg("filename"), py::arg("device") = "cpu",
      "The tensors of a safetensors file as a dict name -> Tensor (safetensors.torch.load_file).");
  m.def(
      "save_safetensors",
      [](const py::object& tensors, const py::object& filename, const py::object& metadata) {
        const std::string path = path_arg(filename, "save_safetensors");
        if (!py::isinstance<py::dict>(tensors)) {
          throw py::type_error("save_safetensors: tensors must be a dict of str -> Tensor, got " +
                               std::string(py::str(py::type::of(tensors).attr("__name__"))));
        }
        NamedTensors named;
        for (auto [key, value] : py::reinterpret_borrow<py::dict>(tensors)) {
          if (!py::isinstance<py::str>(key)) {
            throw py::type_error("save_safetensors: tensor names must be str, got " +
                                 std::string(py::str(py::type::of(key).attr("__name__"))));
          }
          if (!py::isinstance<Tensor>(value)) {
            throw py::type_error("save_safetensors: '" + key.cast<std::string>() + "' is a " +
                                 std::string(py::str(py::type::of(value).attr("__name__"))) + ", expected a Tensor");
          }
          // detach: the bytes are saved, not the autograd graph.
          named.emplace_back(key.cast<std::string>(), value.cast<const Tensor&>().detach());
        }
        std::map<std::string, std::string> meta;
        if (!metadata.is_none()) {
          if (!py::isinstance<py::dict>(metadata)) throw py::type_error("save_safetensors: metadata must be a dict");
          for (auto [key, value] : py::reinterpret_borrow<py::dict>(metadata)) {
            if (!py::isinstance<py::str>(key) || !py::isinstance<py::str>(value)) {
              throw py::type_error("save_safetensors: metadata keys and values must be str");
            }
            meta[key.cast<std::string>()] = value.cast<std::string>();
          }
        }
        py::gil_scoped_release release;
        save_safetensors(path, named, meta);
      },
      py::arg("tensors"), py::arg("filename"), py::arg("metadata") = py::none(),
      "Writes a dict name -> Tensor to a safetensors file (safetensors.torch.save_file).");
  m.def(
      "safetensors_metadata",
      [](const py::object& filename) {
        const std::string path = path_arg(filename, "safetensors_metadata");
        py::gil_scoped_release release;
        return load_safetensors(path).metadata;
      },
      py::arg("filename"), "The __metadata__ strings of a safetensors file.");
}

}  // namespace kiln::python
