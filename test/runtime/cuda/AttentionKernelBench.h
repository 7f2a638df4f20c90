//===- AttentionKernelBench.h - CUDA events for the bench -------*- C++ -*-===//
//
// What AttentionKernelBench.cpp needs of the CUDA runtime, without its
// headers (events travel as void *).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_CUDA_ATTENTIONKERNELBENCH_H
#define TAILOR_TEST_RUNTIME_CUDA_ATTENTIONKERNELBENCH_H

#include <string>

namespace tailor::runtime::cuda::testing {

/// Records `event` (created first when null) on the legacy default stream;
/// "" or the failed call.
std::string recordEvent(void *&event);
/// Waits for `stop`; `ms` gets the time from `start`. "" or the failure.
std::string elapsedMs(void *start, void *stop, float &ms);
/// Destroys an event (null: nothing).
void destroyEvent(void *event);

} // namespace tailor::runtime::cuda::testing

#endif // TAILOR_TEST_RUNTIME_CUDA_ATTENTIONKERNELBENCH_H
