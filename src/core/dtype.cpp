#include "kiln/dtype.h"

#include <array>
#include <string>

#include "kiln/error.h"

namespace kiln {
namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  DTypeKind kind;
  std::string_view torch_name;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"bool", 1, DTypeKind::Bool, "Bool"},
    {"uint8", 1, DTypeKind::Unsigned, "Byte"},
    {"uint16", 2, DTypeKind::Unsigned, "UInt16"},
    {"uint32", 4, DTypeKind::Unsigned, "UInt32"},
    {"uint64", 8, DTypeKind::Unsigned, "UInt64"},
    {"int8", 1, DTypeKind::Signed, "Char"},
    {"int16", 2, DTypeKind::Signed, "Short"},
    {"int32", 4, DTypeKind::Signed, "Int"},
    {"int64", 8, DTypeKind::Signed, "Long"},
    {"float16", 2, DTypeKind::Float, "Half"},
    {"bfloat16", 2, DTypeKind::Float, "BFloat16"},
    {"float32", 4, DTypeKind::Float, "Float"},
    {"float64", 8, DTypeKind::Float, "Double"},
    {"complex64", 8, DTypeKind::Complex, "ComplexFloat"},
    {"complex128", 16, DTypeKind::Complex, "ComplexDouble"},
    {"float8_e4m3fn", 1, DTypeKind::Float, "Float8_e4m3fn"},
    {"float8_e5m2", 1, DTypeKind::Float, "Float8_e5m2"},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
size_t itemsize(DType t) { return info(t).size; }
DTypeKind dtype_kind(DType t) { return info(t).kind; }
std::string_view torch_type_name(DType t) { return info(t).torch_name; }

DType dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kInfo[i].name == name) return static_cast<DType>(i);
  }
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float", DType::Float32},     {"f32", DType::Float32},      {"double", DType::Float64},
      {"f64", DType::Float64},       {"half", DType::Float16},     {"f16", DType::Float16},
      {"bf16", DType::BFloat16},     {"fp8", DType::Float8_e4m3fn}, {"e4m3", DType::Float8_e4m3fn},
      {"e5m2", DType::Float8_e5m2},  {"int", DType::Int32},        {"long", DType::Int64},
      {"short", DType::Int16},       {"cfloat", DType::Complex64}, {"cdouble", DType::Complex128},
  };
  for (const auto& a : kAliases) {
    if (a.name == name) return a.dtype;
  }
  fail(ErrorKind::Type, "dtype", "unknown dtype '{}' (expected a name such as float32, bfloat16, "
       "float8_e4m3fn, int64, bool, complex64)", name);
}

DType to_real(DType t) {
  if (t == DType::Complex64) return DType::Float32;
  if (t == DType::Complex128) return DType::Float64;
  return t;
}

DType to_complex(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Complex128:
      return DType::Complex128;
    case DType::Float32:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Complex64:
      return DType::Complex64;
    default:
      fail(ErrorKind::Type, "to_complex", "no complex counterpart for dtype {}", dtype_name(t));
  }
}

}  // namespace kiln
