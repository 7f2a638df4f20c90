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

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_STATUS_H
