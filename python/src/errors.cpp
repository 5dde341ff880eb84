// C++ exceptions -> Python exceptions. kiln::Error carries the kind PyTorch would
// raise; std::bad_alloc becomes MemoryError; other standard exceptions map as
// pybind11 maps them. Messages may quote bytes from a user's file (a safetensors
// header, a tokenizer.json), which need not be UTF-8: they are decoded with
// backslash escapes, so the message always reaches Python whole.
#include <pybind11/pybind11.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "bindings.h"
#include "kiln/error.h"

namespace kiln::python {
namespace {

// PyErr_SetString would decode `message` as strict UTF-8 and, on an invalid byte,
// raise with an empty message instead.
void raise(PyObject* type, const char* message) {
  PyObject* text = PyUnicode_DecodeUTF8(message, static_cast<Py_ssize_t>(std::strlen(message)), "backslashreplace");
  if (text == nullptr) {
    PyErr_Clear();
    PyErr_SetString(type, "(the error message could not be decoded)");
    return;
  }
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

// kiln's allocator reports its own failures as kiln::Error with the byte count; these
// are the standard library's containers (index lists, shapes, strings) asked for more
// than the machine has, or than a container can hold.
void raise_out_of_memory(const char* what) {
  const std::string message = std::string("out of memory: a host allocation failed (") + what +
                              "); the sizes this call asked for are too large for this machine";
  raise(PyExc_MemoryError, message.c_str());
}

PyObject* python_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Index: return PyExc_IndexError;
    case ErrorKind::Type: return PyExc_TypeError;
    case ErrorKind::Value: return PyExc_ValueError;
    case ErrorKind::NotImplemented: return PyExc_NotImplementedError;
    case ErrorKind::Runtime: return PyExc_RuntimeError;
  }
  return PyExc_RuntimeError;
}

}  // namespace

void register_error_translator() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(python_type(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
      raise_out_of_memory("std::bad_alloc");
    } catch (const std::length_error&) {
      raise_out_of_memory("std::length_error");
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own exceptions: its default translation
    } catch (const std::out_of_range& e) {
      raise(PyExc_IndexError, e.what());
    } catch (const std::overflow_error& e) {
      raise(PyExc_OverflowError, e.what());
    } catch (const std::invalid_argument& e) {
      raise(PyExc_ValueError, e.what());
    } catch (const std::domain_error& e) {
      raise(PyExc_ValueError, e.what());
    } catch (const std::range_error& e) {
      raise(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
      raise(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace kiln::python
