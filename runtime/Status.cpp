//===- Status.cpp - the C API's version and last-error storage ------------===//

#include "runtime/Status.h"

#include <exception>
#include <new>

namespace tailor::runtime {

// One message per thread: concurrent callers never see each other's errors.
static thread_local std::string lastError;

tailor_status fail(tailor_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

tailor_status ok() {
  lastError.clear();
  return TAILOR_OK;
}

/// Sets the last error without letting an allocation failure escape: with
/// no memory left even the message may not fit, and the status still must.
static void recordNoThrow(const char *function, const char *kind,
                          const char *what) noexcept {
  try {
    lastError = std::string(function) + ": " + kind + what;
  } catch (...) {
    lastError.clear();
  }
}

tailor_status failFromCurrentException(const char *function) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    recordNoThrow(function, "out of memory", "");
  } catch (const std::exception &error) {
    recordNoThrow(function, "unexpected exception: ", error.what());
  } catch (...) {
    recordNoThrow(function, "unexpected exception of unknown type", "");
  }
  return TAILOR_ERROR_INTERNAL;
}

} // namespace tailor::runtime

extern "C" const char *tailor_version(void) { return TAILOR_VERSION_STRING; }

extern "C" const char *tailor_last_error(void) {
  return tailor::runtime::lastError.c_str();
}
