// kiln::Error: every invalid input surfaces as one of these, never as a crash.
#pragma once

#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace kiln {

// Which Python exception an error maps to (PyTorch raises the same ones).
enum class ErrorKind { Runtime, Value, Type, Index, NotImplemented };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Message format: "<op>: <what was wrong and what was expected>".
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, std::string_view op, fmt::format_string<Args...> f,
                       Args&&... args) {
  throw Error(kind, std::string(op) + ": " + fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kiln

// KILN_CHECK(cond, "op", "got {} but expected {}", a, b) throws a RuntimeError-kind Error.
#define KILN_CHECK(cond, op, ...) \
  do {                            \
    if (!(cond)) [[unlikely]] ::kiln::fail(::kiln::ErrorKind::Runtime, op, __VA_ARGS__); \
  } while (0)
#define KILN_CHECK_KIND(cond, kind, op, ...) \
  do {                                       \
    if (!(cond)) [[unlikely]] ::kiln::fail(::kiln::ErrorKind::kind, op, __VA_ARGS__); \
  } while (0)
