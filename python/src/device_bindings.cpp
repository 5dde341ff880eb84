// kiln.device, Tensor.to(device) / .cpu(), and kiln.vulkan (is_available, synchronize,
// memory statistics, the availability report), shaped like torch.device and torch.cuda.
#include <pybind11/stl.h>

#include <memory>
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
  // torch.cuda.Stream / Event / stream(...)'s shapes.
  py::class_<VulkanStream>(vulkan, "Stream")
      .def(py::init([] { return VulkanStream::create(); }),
           "A side stream from the device's pool (streams 1..31 in turn, as PyTorch's pool)")
      .def_property_readonly("id", &VulkanStream::id)
      .def_property_readonly("device", [](const VulkanStream&) { return Device{DeviceType::Vulkan, 0}; })
      .def("query", &VulkanStream::query, "Whether all work queued on the stream has finished")
      .def("synchronize", &VulkanStream::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("wait_event", &VulkanStream::wait_event, py::arg("event"))
      .def("wait_stream", &VulkanStream::wait_stream, py::arg("stream"))
      .def("record_event",
           [](const VulkanStream& s, VulkanEvent* event) {
             auto owned = event == nullptr ? std::make_unique<VulkanEvent>() : nullptr;
             VulkanEvent& e = event != nullptr ? *event : *owned;
             e.record(s);
             return owned ? py::cast(std::move(owned)) : py::cast(event, py::return_value_policy::reference);
           },
           py::arg("event") = nullptr, "Records `event` (a new one when None) on this stream and returns it")
      .def("__eq__", [](const VulkanStream& a, const VulkanStream& b) { return a == b; })
      .def("__hash__", [](const VulkanStream& s) { return py::hash(py::int_(s.id())); })
      .def("__repr__", [](const VulkanStream& s) {
        return "<kiln.vulkan.Stream device=vulkan:0 id=" + std::to_string(s.id()) + ">";
      });
  vulkan.def("current_stream", [] { return VulkanStream::current(); }, "The calling thread's current stream");
  vulkan.def("default_stream", [] { return VulkanStream::default_stream(); });
  // `with kiln.vulkan.stream(s):` (s None: no change, as PyTorch).
  struct StreamContext {
    std::optional<VulkanStream> stream;
    std::unique_ptr<VulkanStreamGuard> guard;
  };
  py::class_<StreamContext>(vulkan, "StreamContext")
      .def("__enter__", [](StreamContext& c) {
        if (c.stream) c.guard = std::make_unique<VulkanStreamGuard>(*c.stream);
        return c.stream;
      })
      .def("__exit__", [](StreamContext& c, const py::args&) { c.guard.reset(); });
  vulkan.def("stream", [](std::optional<VulkanStream> s) { return StreamContext{s, nullptr}; }, py::arg("stream"),
             "Makes `stream` the current stream inside a with block");
  const auto stream_or_current = [](const std::optional<VulkanStream>& s) { return s ? *s : VulkanStream::current(); };
  py::class_<VulkanEvent>(vulkan, "Event")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def("record", [stream_or_current](VulkanEvent& e, std::optional<VulkanStream> s) { e.record(stream_or_current(s)); },
           py::arg("stream") = py::none())
      .def("wait", [stream_or_current](VulkanEvent& e, std::optional<VulkanStream> s) { e.wait(stream_or_current(s)); },
           py::arg("stream") = py::none())
      .def("query", &VulkanEvent::query)
      .def("synchronize", &VulkanEvent::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_time", &VulkanEvent::elapsed_time, py::arg("end_event"))
      .def_property_readonly("enable_timing", &VulkanEvent::enable_timing);
  tensor.def("record_stream", [](const Tensor& t, const VulkanStream& s) { vulkan_record_stream(t, s); },
             py::arg("stream"),
             "The tensor's memory is in use by `stream`: it is reused only after the work queued there has run");
}

}  // namespace kiln::python
