//===- Status.cpp - the C API's version and last-error storage ------------===//

#include "runtime/Status.h"

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

} // namespace tailor::runtime

extern "C" const char *tailor_version(void) { return TAILOR_VERSION_STRING; }

extern "C" const char *tailor_last_error(void) {
  return tailor::runtime::lastError.c_str();
}
