/*===- c_api_checks.h - the check macros of the C API's C tests -----------===*
 *
 * Shared by c_api_test.c and generate_api_test.c: each failed check prints
 * where and the C API's last error, and counts into the including file's
 * `failures`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef TAILOR_TEST_RUNTIME_C_API_CHECKS_H
#define TAILOR_TEST_RUNTIME_C_API_CHECKS_H

#include "tailor/runtime.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, what)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__,          \
              __LINE__, what, tailor_last_error());                            \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* A call must return `want` and, when it fails, leave a message. */
#define EXPECT_STATUS(call, want)                                              \
  do {                                                                         \
    tailor_status got_ = (call);                                               \
    if (got_ != (want)) {                                                      \
      fprintf(stderr, "FAIL %s:%d: %s returned %d, expected %d (%s)\n",        \
              __FILE__, __LINE__, #call, (int)got_, (int)(want),               \
              tailor_last_error());                                            \
      ++failures;                                                              \
    } else if ((want) != TAILOR_OK && tailor_last_error()[0] == '\0') {        \
      fprintf(stderr, "FAIL %s:%d: %s failed without a message\n", __FILE__,   \
              __LINE__, #call);                                                \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define EXPECT_OK(call) EXPECT_STATUS(call, TAILOR_OK)
#define EXPECT_INVALID(call) EXPECT_STATUS(call, TAILOR_ERROR_INVALID_ARGUMENT)

/* The last error mentions `text`. */
#define EXPECT_ERROR_SAYS(text)                                                \
  CHECK(strstr(tailor_last_error(), (text)) != NULL, "error mentions " text)

#endif /* TAILOR_TEST_RUNTIME_C_API_CHECKS_H */
