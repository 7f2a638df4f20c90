//===- RuntimeApiTest.cpp - the runtime's C API contracts -----------------===//

#include "runtime/Status.h"
#include "tailor/runtime.h"

#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace {

TEST(RuntimeApi, ReportsItsVersion) {
  EXPECT_STREQ(tailor_version(), TAILOR_TEST_EXPECTED_VERSION);
}

TEST(RuntimeApi, RejectsNullPointersWithAMessage) {
  EXPECT_EQ(tailor_cuda_device_count(nullptr), TAILOR_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tailor_last_error(), "count must not be null");
  EXPECT_EQ(tailor_cuda_device_info(0, nullptr),
            TAILOR_ERROR_INVALID_ARGUMENT);
}

// Every entry point runs inside guard/guardValue: what a C++ exception
// would have been is a status and a message naming the entry point.
TEST(RuntimeApi, ExceptionsBecomeStatusesWithAMessage) {
  using tailor::runtime::guard;
  using tailor::runtime::guardValue;
  EXPECT_EQ(
      guard("tailor_x", []() -> tailor_status { throw std::bad_alloc(); }),
      TAILOR_ERROR_INTERNAL);
  EXPECT_STREQ(tailor_last_error(), "tailor_x: out of memory");
  EXPECT_EQ(guard("tailor_y",
                  []() -> tailor_status {
                    throw std::runtime_error("vector::reserve");
                  }),
            TAILOR_ERROR_INTERNAL);
  EXPECT_STREQ(tailor_last_error(),
               "tailor_y: unexpected exception: vector::reserve");
  EXPECT_EQ(guardValue("tailor_z", -1, []() -> int { throw 7; }), -1);
  EXPECT_STREQ(tailor_last_error(),
               "tailor_z: unexpected exception of unknown type");
  EXPECT_EQ(guard("tailor_w", [] { return tailor::runtime::ok(); }), TAILOR_OK);
  EXPECT_STREQ(tailor_last_error(), "");
}

// Holds on machines with and without GPUs: either devices are listed and
// described, or the answer is UNAVAILABLE with a reason and a count of 0.
TEST(RuntimeApi, DeviceCountIsConsistentWithDeviceInfo) {
  int count = -1;
  tailor_status status = tailor_cuda_device_count(&count);
  if (status != TAILOR_OK) {
    EXPECT_EQ(status, TAILOR_ERROR_UNAVAILABLE) << tailor_last_error();
    EXPECT_EQ(count, 0);
    EXPECT_GT(std::strlen(tailor_last_error()), 0u);
    tailor_device_info info;
    EXPECT_NE(tailor_cuda_device_info(0, &info), TAILOR_OK);
    return;
  }
  ASSERT_GT(count, 0);
  EXPECT_STREQ(tailor_last_error(), "");
  for (int i = 0; i < count; ++i) {
    tailor_device_info info;
    ASSERT_EQ(tailor_cuda_device_info(i, &info), TAILOR_OK)
        << tailor_last_error();
    EXPECT_EQ(info.ordinal, i);
    EXPECT_GT(std::strlen(info.name), 0u);
    EXPECT_GE(info.sm_major, 7);
    EXPECT_GT(info.total_memory_bytes, 0u);
  }
  tailor_device_info info;
  EXPECT_EQ(tailor_cuda_device_info(count, &info),
            TAILOR_ERROR_INVALID_ARGUMENT);
}

TEST(RuntimeApi, CudaBuildFlagMatchesTheBuild) {
  EXPECT_EQ(tailor_built_with_cuda(), TAILOR_TEST_EXPECT_CUDA);
}

} // namespace
