// Element types: names, sizes and kinds. Light header: no SIMD, no templates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  Bool,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Float8_e4m3fn,
  Float8_e5m2,
};

inline constexpr int kNumDTypes = 17;

// What kind of number a dtype holds; promotion works on these categories.
enum class DTypeKind : uint8_t { Bool, Unsigned, Signed, Float, Complex };

// PyTorch's spelling: "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType t);
size_t itemsize(DType t);
DTypeKind dtype_kind(DType t);
// PyTorch's C++ ScalarType name ("Long", "Float", "BFloat16", ...), which PyTorch's
// error messages print ("... not implemented for 'Long'").
std::string_view torch_type_name(DType t);
// Parses a name as dtype_name prints it, plus PyTorch's aliases ("float", "half",
// "bf16", "fp8", "int", "long", ...). Throws kiln::Error for an unknown name.
DType dtype_from_name(std::string_view name);

inline bool is_floating(DType t) { return dtype_kind(t) == DTypeKind::Float; }
inline bool is_complex(DType t) { return dtype_kind(t) == DTypeKind::Complex; }
inline bool is_integral(DType t, bool include_bool = false) {
  DTypeKind k = dtype_kind(t);
  return k == DTypeKind::Unsigned || k == DTypeKind::Signed || (include_bool && k == DTypeKind::Bool);
}
inline bool is_unsigned(DType t) { return dtype_kind(t) == DTypeKind::Unsigned; }
inline bool is_fp8(DType t) { return t == DType::Float8_e4m3fn || t == DType::Float8_e5m2; }
// f16/bf16/fp8: stored narrow, computed in float32.
inline bool is_reduced_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || is_fp8(t);
}

// The real counterpart of a complex dtype (complex64 -> float32), identity otherwise.
DType to_real(DType t);
// The complex counterpart of a floating dtype (float64 -> complex128).
DType to_complex(DType t);

// The dtype arithmetic runs in: narrow floats (f16, bf16, fp8) widen to float32
// ("compute wide, store narrow"); everything else computes in itself.
inline DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }

// The dtype a float-valued op (sqrt, exp, true division, mean, ...) returns for
// input dtype t: integers and bool give the default float dtype (float32).
inline DType float_result_dtype(DType t) { return is_floating(t) || is_complex(t) ? t : DType::Float32; }

}  // namespace kiln
