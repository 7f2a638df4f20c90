//===- RuntimeApiTest.cpp - the runtime's C API contracts -----------------===//

#include "tailor/runtime.h"

#include <gtest/gtest.h>

#include <cstring>
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
