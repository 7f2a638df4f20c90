/*===- runtime.h - tailor runtime C API ----------------------------*- C -*-===*
 *
 * The runtime executes compiled plans. It links no LLVM or MLIR, so an
 * application can embed it with a C compiler and, optionally, CUDA. Every call
 * returns a tailor_status; on failure tailor_last_error() says what went
 * wrong. No call exits the process.
 *
 *===----------------------------------------------------------------------===*/

#ifndef TAILOR_RUNTIME_H
#define TAILOR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever a declaration below changes incompatibly. */
#define TAILOR_RUNTIME_API_VERSION 1

typedef enum tailor_status {
  TAILOR_OK = 0,
  /** A caller passed a null pointer, an out-of-range index, ... */
  TAILOR_ERROR_INVALID_ARGUMENT = 1,
  /** What was asked for does not exist here (no CUDA, no GPU, no driver). */
  TAILOR_ERROR_UNAVAILABLE = 2,
  /** A CUDA, NCCL or system call failed; the message names it. */
  TAILOR_ERROR_INTERNAL = 3,
} tailor_status;

/** The runtime's version, e.g. "0.1.0". */
const char *tailor_version(void);

/** The message of the last failing call on this thread ("" if none). */
const char *tailor_last_error(void);

/** 1 if this runtime was built with its CUDA backend, else 0. */
int tailor_built_with_cuda(void);

/** What the runtime knows of one GPU. */
typedef struct tailor_device_info {
  int ordinal;
  char name[256];
  /** Compute capability, e.g. 9.0 for H100. */
  int sm_major;
  int sm_minor;
  int multiprocessors;
  uint64_t total_memory_bytes;
} tailor_device_info;

/**
 * Counts the CUDA GPUs this process can use. On TAILOR_ERROR_UNAVAILABLE
 * (built without CUDA, no driver, no device) *count is 0 and
 * tailor_last_error() says which.
 */
tailor_status tailor_cuda_device_count(int *count);

/** Describes GPU `ordinal` (0 <= ordinal < tailor_cuda_device_count). */
tailor_status tailor_cuda_device_info(int ordinal, tailor_device_info *info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TAILOR_RUNTIME_H */
