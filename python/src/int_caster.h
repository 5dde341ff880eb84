// Python ints past int64 (uint64) handed to a C++ int64_t (uint64_t) argument.
//
// pybind11's own caster answers such an int with "incompatible function arguments" and
// a dump of the C++ signature, as if the type were wrong. PyTorch raises RuntimeError
// "Overflow when unpacking long"; kiln raises the same kind with the same words, plus
// the value and the range it had to fit (the op is named by the traceback: pybind11
// does not tell a caster which function or argument it loads).
//
// These full specialisations take precedence over pybind11's generic arithmetic caster;
// bindings.h includes this header, so every binding file sees them before any use.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace kiln::python {
// Throws kiln::Error (RuntimeError) when `src` is an int that does not fit `range`
// (is_unsigned: uint64, else int64); returns normally when it is not an int at all.
void throw_if_int_overflow(pybind11::handle src, bool is_unsigned);
}  // namespace kiln::python

namespace pybind11::detail {

// Delegates to the generic caster of the same-width long long type; only when that one
// refuses an int does it look at why, and overflow becomes kiln's error.
template <typename Int, typename Same, bool IsUnsigned>
class overflow_reporting_int_caster {
 public:
  PYBIND11_TYPE_CASTER(Int, const_name("int"));
  static_assert(sizeof(Int) == sizeof(Same));

  bool load(handle src, bool convert) {
    type_caster<Same> inner;
    if (inner.load(src, convert)) {
      value = static_cast<Int>(static_cast<Same>(inner));
      return true;
    }
    if (convert) kiln::python::throw_if_int_overflow(src, IsUnsigned);
    return false;
  }

  static handle cast(Int src, return_value_policy policy, handle parent) {
    return type_caster<Same>::cast(static_cast<Same>(src), policy, parent);
  }
};

template <>
class type_caster<long> : public overflow_reporting_int_caster<long, long long, false> {};
template <>
class type_caster<unsigned long> : public overflow_reporting_int_caster<unsigned long, unsigned long long, true> {};

}  // namespace pybind11::detail
