// kiln.profiler: start/stop the op profiler (kiln/profiler.h) and read its report.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "bindings.h"
#include "kiln/error.h"
#include "kiln/profiler.h"

namespace kiln::python {

namespace {

// PhaseScope keeps the name's pointer: names from Python live here for the process.
const char* interned(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard lock(mutex);
  return names.insert(name).first->c_str();
}

// `with kiln.profiler.profile() as p:` records the block; p.report holds the result.
struct ProfileBlock {
  std::optional<profiler::Report> report;
};

// `with kiln.profiler.phase("decode", tokens=1):` names the ops of the block.
struct PhaseBlock {
  const char* name;
  int64_t tokens;
  std::unique_ptr<profiler::PhaseScope> scope;
};

}  // namespace

void bind_profiler(py::module_& m) {
  py::module_ p = m.def_submodule("profiler", "Per-op time, bytes and share of each phase (prefill, decode)");
  py::class_<profiler::OpRecord>(p, "OpRecord")
      .def_readonly("phase", &profiler::OpRecord::phase)
      .def_readonly("op", &profiler::OpRecord::op)
      .def_readonly("calls", &profiler::OpRecord::calls)
      .def_readonly("seconds", &profiler::OpRecord::seconds)
      .def_readonly("bytes", &profiler::OpRecord::bytes)
      .def_readonly("flops", &profiler::OpRecord::flops)
      .def("__repr__", [](const profiler::OpRecord& r) {
        return "OpRecord(phase='" + r.phase + "', op='" + r.op + "', calls=" + std::to_string(r.calls) +
               ", seconds=" + std::to_string(r.seconds) + ")";
      });
  py::class_<profiler::PhaseRecord>(p, "PhaseRecord")
      .def_readonly("phase", &profiler::PhaseRecord::phase)
      .def_readonly("seconds", &profiler::PhaseRecord::seconds)
      .def_readonly("tokens", &profiler::PhaseRecord::tokens)
      .def_readonly("device_commands", &profiler::PhaseRecord::device_commands)
      .def_readonly("device_submits", &profiler::PhaseRecord::device_submits)
      .def_readonly("device_waits", &profiler::PhaseRecord::device_waits);
  py::class_<profiler::Report>(p, "Report")
      .def_readonly("ops", &profiler::Report::ops)
      .def_readonly("phases", &profiler::Report::phases)
      .def("table", &profiler::Report::format, py::arg("roofline_gbps") = 0.0, py::arg("peak_gflops") = 0.0,
           "The report as text: one table per phase")
      .def("__str__", [](const profiler::Report& r) { return r.format(); });
  p.def("start", &profiler::start, "Clears the records and starts recording every op (all threads)");
  p.def("stop", &profiler::stop, "Stops recording and returns the Report");
  p.def("enabled", &profiler::enabled);
  py::class_<ProfileBlock>(p, "profile", "Context manager: records the ops of its block; .report afterwards")
      .def(py::init<>())
      .def("__enter__", [](ProfileBlock& b) -> ProfileBlock& {
        profiler::start();
        return b;
      }, py::return_value_policy::reference)
      .def("__exit__", [](ProfileBlock& b, const py::args&) { b.report = profiler::stop(); })
      .def_property_readonly("report", [](const ProfileBlock& b) {
        if (!b.report) throw Error(ErrorKind::Runtime, "profiler.profile: the report exists once the with block ended");
        return *b.report;
      });
  py::class_<PhaseBlock>(p, "phase",
                         "Context manager: names the phase of its block's ops and counts its wall time and tokens")
      .def(py::init([](const std::string& name, int64_t tokens) { return PhaseBlock{interned(name), tokens, nullptr}; }),
           py::arg("name"), py::arg("tokens") = 0)
      .def("__enter__", [](PhaseBlock& b) -> PhaseBlock& {
        b.scope = std::make_unique<profiler::PhaseScope>(b.name);
        b.scope->add_tokens(b.tokens);
        return b;
      }, py::return_value_policy::reference)
      .def("__exit__", [](PhaseBlock& b, const py::args&) { b.scope.reset(); });
}

}  // namespace kiln::python
