//===- DeviceError.h - the device's error record on the host ----*- C++ -*-===//
//
// Kernels that read run-time indices report the first bad one in an error
// record in device memory (codegen/cuda/DeviceError.cuh); LaunchContext
// hands launchers its address and takes it back after a synchronization.
// This file phrases a record as the CPU kernel of the same name phrases its
// run error, so a bad token id reads alike on both backends.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CUDA_DEVICEERROR_H
#define TAILOR_RUNTIME_CUDA_DEVICEERROR_H

#include "codegen/cuda/DeviceError.cuh"

#include <string>

namespace tailor::runtime::cuda {

/// The record's layout, shared with the device code.
using DeviceErrorRecord = tl::ErrorRecord;
static_assert(sizeof(DeviceErrorRecord) == 32,
              "the device error record is 32 bytes on host and device");

/// The run error a set record stands for, as the CPU kernel words it, e.g.
/// "token id 70000 at position 3 is out of range [0, 32000)"; "" when the
/// record is clear. The step (`site`) is not part of it: the runtime
/// prefixes the step it names.
std::string describeDeviceError(const DeviceErrorRecord &record);

} // namespace tailor::runtime::cuda

#endif // TAILOR_RUNTIME_CUDA_DEVICEERROR_H
