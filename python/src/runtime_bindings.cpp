// Threads (the calling thread's execution context), allocator statistics and the
// doctor report.
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/allocator.h"
#include "kiln/context.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

namespace kiln::python {

py::dict allocator_stats_dict(const AllocatorStats& s) {
  py::dict d;
  d["allocated_bytes"] = s.allocated_bytes;
  d["peak_allocated_bytes"] = s.peak_allocated_bytes;
  d["reserved_bytes"] = s.reserved_bytes;
  d["peak_reserved_bytes"] = s.peak_reserved_bytes;
  d["num_allocs"] = s.num_allocs;
  d["num_cache_hits"] = s.num_cache_hits;
  return d;
}

void bind_runtime(py::module_& m) {
  // Without the GIL: replacing the pool starts and joins threads, and needs no Python.
  m.def("set_num_threads", &set_num_threads, py::arg("n"), py::call_guard<py::gil_scoped_release>());
  // The calling thread's count: inside `with kiln.threads(n):` that is n.
  m.def("get_num_threads", [] { return get_num_threads(); });
  bind_threads(m);
  m.def("memory_stats", [] { return allocator_stats_dict(allocator_stats()); });
  m.def("memory_allocated", [] { return allocator_stats().allocated_bytes; });
  m.def("max_memory_allocated", [] { return allocator_stats().peak_allocated_bytes; });
  m.def("memory_reserved", [] { return allocator_stats().reserved_bytes; });
  m.def("reset_peak_memory_stats", &reset_peak_memory_stats);
  m.def("empty_cache", &empty_cache);
  m.def("doctor", [] {
        const ExecutionContext context = current_context();  // holds its pool while probing
        py::gil_scoped_release release;
        return doctor_report(context.pool());
      },
        "The availability report `kiln doctor` prints (runs the bandwidth probe).");
  m.def("__version__", [] { return std::string(kiln_version()); });
}

}  // namespace kiln::python
