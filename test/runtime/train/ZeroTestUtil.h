//===- ZeroTestUtil.h - hand-built sharded plans: loading and sessions ----===//
//
// What ZeroRuntimeTest and Zero3RuntimeTest share: loading a plan built in
// memory, the loader's message for it, a session at a given rank, and
// checking that a message names what it should.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TEST_RUNTIME_TRAIN_ZEROTESTUTIL_H
#define TAILOR_TEST_RUNTIME_TRAIN_ZEROTESTUTIL_H

#include "runtime/Plan.h"
#include "runtime/Session.h"
#include "runtime/train/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tailor::train::testing {

/// Loads a plan from its bytes; null with `error` set when the loader
/// refuses it.
inline std::unique_ptr<runtime::LoadedPlan>
loadPlanBytes(const std::vector<uint8_t> &bytes, const char *name,
              std::string &error) {
  error.clear();
  return runtime::LoadedPlan::loadFromMemory(bytes.data(), bytes.size(), ".",
                                             name, runtime::LoadOptions(),
                                             error);
}

/// The loader's message for `bytes` ("" when it loads).
inline std::string loadErrorOf(const std::vector<uint8_t> &bytes,
                               const char *name) {
  std::string error;
  std::unique_ptr<runtime::LoadedPlan> plan = loadPlanBytes(bytes, name, error);
  EXPECT_EQ(plan == nullptr, !error.empty()) << error;
  return error;
}

inline ::testing::AssertionResult mentions(const std::string &error,
                                           const std::string &part) {
  if (error.find(part) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "'" << error << "' does not mention '" << part << "'";
}

/// A one-thread session of `plan` as rank `rank`.
inline std::unique_ptr<runtime::Session>
openAtRank(const runtime::LoadedPlan &plan, int rank, std::string &error) {
  int status = 0;
  error.clear();
  return runtime::Session::create(plan, 1, error, status, rank);
}

/// A plan loaded from its bytes, a session of it at a rank, and its
/// checkpoint layout: what checkpoint tests move tensors between.
struct PlanWithLayout {
  std::unique_ptr<runtime::LoadedPlan> plan;
  std::unique_ptr<runtime::Session> session;
  CheckpointLayout layout;
};

/// Fills `out` from `bytes` at `rank`; "" or why it failed.
inline std::string openWithLayout(const std::vector<uint8_t> &bytes,
                                  const char *name, int rank,
                                  PlanWithLayout &out) {
  std::string error;
  out.plan = loadPlanBytes(bytes, name, error);
  if (!out.plan) {
    return error;
  }
  out.session = openAtRank(*out.plan, rank, error);
  if (!out.session) {
    return error;
  }
  buildCheckpointLayout(*out.plan, *out.session, out.layout, error);
  return error;
}

} // namespace tailor::train::testing

#endif // TAILOR_TEST_RUNTIME_TRAIN_ZEROTESTUTIL_H
