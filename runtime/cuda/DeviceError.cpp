//===- DeviceError.cpp - the device's error record as a run error ---------===//

#include "runtime/cuda/DeviceError.h"

namespace tailor::runtime::cuda {

namespace {

std::string outOfRange(const char *what, const DeviceErrorRecord &r,
                       const char *at, bool negative) {
  return std::string(what) + " " + std::to_string(r.value) + " at " + at +
         " " + std::to_string(r.position) + " is out of range [" +
         std::to_string(negative ? -r.bound : 0) + ", " +
         std::to_string(r.bound) + ")";
}

std::string badIndex(const char *kernel, const DeviceErrorRecord &r) {
  return std::string(kernel) + ": " + outOfRange("index", r, "position", true);
}

} // namespace

std::string describeDeviceError(const DeviceErrorRecord &r) {
  switch (r.code) {
  case tl::kNoError:
    return "";
  case tl::kEmbeddingId:
  case tl::kEmbeddingGradId:
    return outOfRange("token id", r, "position", false);
  case tl::kCrossEntropyLabel:
  case tl::kCrossEntropyGradLabel:
    return outOfRange("label", r, "row", false);
  case tl::kGatherElementsIndex:
    return badIndex("gather_elements", r);
  case tl::kScatterElementsIndex:
    return badIndex("scatter_elements", r);
  case tl::kGatherNdIndex:
    return badIndex("gather_nd", r);
  case tl::kScatterNdIndex:
    return badIndex("scatter_nd", r);
  case tl::kModByZero:
    return "mod: integer division by zero (divisor element " +
           std::to_string(r.position) + ")";
  case tl::kDivByZero:
    return "integer division by zero (divisor element " +
           std::to_string(r.position) + ")";
  case tl::kKvCachePosition:
    return "position " + std::to_string(r.value) +
           " is outside the KV cache [0, " + std::to_string(r.bound) + ")";
  }
  return "a kernel reported error code " + std::to_string(r.code) +
         ", which this runtime does not know (value " +
         std::to_string(r.value) + ", position " + std::to_string(r.position) +
         ", bound " + std::to_string(r.bound) + ")";
}

} // namespace tailor::runtime::cuda
