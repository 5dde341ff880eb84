// kiln.device, Tensor.to(device) / .cpu(), and kiln.vulkan (is_available, synchronize,
// memory statistics, the availability report), shaped like torch.device and torch.cuda.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "kiln/device.h"
#include "kiln/runtime.h"
#include "kiln/vulkan.h"

namespace kiln::python {
namespace {

Tensor to_device(const Tensor& t, const Device& device, std::optional<DType> dtype) {
  Tensor out = t.to(device);
  return dtype ? out.to(*dtype) : out;
}

}  // namespace

void bind_devices(py::module_& m) {
  py::class_<Device>(m, "device")
      .def(py::init([](const std::string& name) { return device_from_string(name); }), py::arg("type"))
      .def(py::init([](const std::string& type, int index) {
             return device_from_string(type + ":" + std::to_string(index));
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](const Device& d) { return std::string(device_type_name(d.type)); })
      .def_property_readonly("index", [](const Device& d) { return d.index; })
      .def("__str__", &Device::str)
      .def("__repr__",
           [](const Device& d) {
             return d.type == DeviceType::CPU ? std::string("device(type='cpu')")
                                              : "device(type='" + std::string(device_type_name(d.type)) +
                                                    "', index=" + std::to_string(d.index) + ")";
           })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__eq__", [](const Device& a, const std::string& b) { return a == device_from_string(b); })
      .def("__hash__", [](const Device& d) { return py::hash(py::make_tuple(static_cast<int>(d.type), d.index)); });
  py::implicitly_convertible<py::str, Device>();

  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor
      .def("to", &to_device, py::arg("device"), py::arg("dtype") = py::none(),
           "A copy on `device` (a kiln.device or a string such as \"vulkan\"), optionally converted to dtype")
      .def("cpu", [](const Tensor& t) { return t.to(kCPU); })
      .def_property_readonly("is_vulkan", [](const Tensor& t) { return t.device().type == DeviceType::Vulkan; });

  auto vulkan = m.def_submodule("vulkan", "The Vulkan device (like torch.cuda)");
  vulkan.def("is_available", &vulkan_is_available, "Whether a usable Vulkan device exists (kiln doctor says why not)");
  // The doctor report's own serialiser, so both list the same keys.
  vulkan.def("availability", [] { return py::module_::import("json").attr("loads")(vulkan_report_json()); },
             "The probe's report: usable, reason, devices with their limits and missing features, device memory");
  vulkan.def("synchronize", &vulkan_synchronize, py::call_guard<py::gil_scoped_release>(),
             "Waits for every kernel and copy queued on the device");
  vulkan.def("queue_stats", [] {
    const VulkanQueueStats q = vulkan_queue_stats();
    py::dict d;
    d["commands"] = q.commands;
    d["submits"] = q.submits;
    d["waits"] = q.waits;
    d["batch_size"] = q.batch_size;
    return d;
  }, "Kernels and copies recorded, command buffers submitted, host waits so far");
  vulkan.def("validation_error_count", &vulkan_validation_error_count,
             "Validation-layer errors so far (KILN_VULKAN_VALIDATION=1 turns the layer on)");
  vulkan.def("memory_stats", [] { return allocator_stats_dict(vulkan_memory_stats()); });
  vulkan.def("memory_allocated", [] { return vulkan_memory_stats().allocated_bytes; });
  vulkan.def("max_memory_allocated", [] { return vulkan_memory_stats().peak_allocated_bytes; });
  vulkan.def("memory_reserved", [] { return vulkan_memory_stats().reserved_bytes; });
  vulkan.def("reset_peak_memory_stats", &vulkan_reset_peak_memory_stats);
  vulkan.def("empty_cache", &vulkan_empty_cache, py::call_guard<py::gil_scoped_release>());
  // torch.cuda.Event's shape; kiln has one command stream per device, so `stream`
  // arguments are accepted for compatibility and must be None.
  const auto no_stream = [](const py::object& stream) {
    if (!stream.is_none()) throw py::value_error("Event: kiln has no Vulkan streams yet; pass stream=None");
  };
  py::class_<VulkanEvent>(vulkan, "Event")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def("record", [no_stream](VulkanEvent& e, const py::object& stream) { no_stream(stream); e.record(); },
           py::arg("stream") = py::none())
      .def("wait", [no_stream](VulkanEvent& e, const py::object& stream) { no_stream(stream); e.wait(); },
           py::arg("stream") = py::none())
      .def("query", &VulkanEvent::query)
      .def("synchronize", &VulkanEvent::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_time", &VulkanEvent::elapsed_time, py::arg("end_event"))
      .def_property_readonly("enable_timing", &VulkanEvent::enable_timing);
}

}  // namespace kiln::python
