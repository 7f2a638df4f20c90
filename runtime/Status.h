//===- Status.h - error reporting inside the runtime ------------*- C++ -*-===//

#ifndef TAILOR_RUNTIME_STATUS_H
#define TAILOR_RUNTIME_STATUS_H

#include "runtime/include/tailor/runtime.h"

#include <string>

namespace tailor::runtime {

/// Records `message` as this thread's last error and returns `status`, so
/// API functions can `return fail(TAILOR_ERROR_..., "...")`.
tailor_status fail(tailor_status status, std::string message);

/// Clears this thread's last error and returns TAILOR_OK.
tailor_status ok();

/// Inside a `catch`: records the exception in flight as this thread's last
/// error, "<function>: <what>" ("out of memory" for std::bad_alloc), and
/// returns TAILOR_ERROR_INTERNAL. Never throws itself.
tailor_status failFromCurrentException(const char *function) noexcept;

/// Runs `body` and returns its result; a C++ exception it throws becomes
/// `onException` plus a last error naming `function` and the exception. No
/// exception may cross the C API, so every entry point runs inside this.
template <typename Result, typename Body>
Result guardValue(const char *function, Result onException,
                  Body &&body) noexcept {
  try {
    return body();
  } catch (...) {
    failFromCurrentException(function);
    return onException;
  }
}

/// guardValue for entry points that return a status.
template <typename Body>
tailor_status guard(const char *function, Body &&body) noexcept {
  try {
    return body();
  } catch (...) {
    return failFromCurrentException(function);
  }
}

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_STATUS_H
