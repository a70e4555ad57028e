// Errors as values: a recoverable failure is returned, never thrown across a
// part's boundary. An Error carries the errno (0 when the failure is not a
// syscall's) and a message that says what went wrong in operator terms.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace tally {

struct Error {
  int code = 0;         // errno, or 0
  std::string message;  // what went wrong, and where
};

Error errnoError(int code, std::string what);  // "what: strerror(code)"

// [[nodiscard]]: a failure dropped on the floor is how a bound silently stops
// binding; a caller that truly does not care says so with a cast and a reason.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;

}  // namespace tally
