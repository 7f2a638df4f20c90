//===- CApiHandles.h - what the C API's opaque handles hold ----*- C++ -*-===//
//
// The structs behind tailor_plan, tailor_session and tailor_trainer, and the
// registry of live handles every entry point checks, shared by the files
// that implement the C API (CApi.cpp, CApiWeights.cpp, CApiTrainer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CAPIHANDLES_H
#define TAILOR_RUNTIME_CAPIHANDLES_H

#include "runtime/Plan.h"
#include "runtime/Session.h"

#include "runtime/include/tailor/runtime.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace tailor::train {
class Trainer;
} // namespace tailor::train

namespace tailor::runtime {

/// A training state as the C API lists it: one logical tensor (a sharded
/// state's members are listed one by one, `<member>.<kind>`).
struct StateEntry {
  std::string name;
  std::string parameter;
  std::string kind;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  bool sharded = false;
};

/// The logical states of `plan`, in the plan's order.
std::vector<StateEntry> listStates(const LoadedPlan &plan);

/// The handles this library made and has not freed. A freed, foreign or
/// stray pointer is refused with a status instead of being dereferenced
/// (one hash lookup under a mutex per call: cheap next to any run).
class LiveHandles {
public:
  void add(const void *handle);
  bool remove(const void *handle);
  bool contains(const void *handle);

private:
  std::mutex mutex;
  std::unordered_set<const void *> handles;
};

LiveHandles &livePlans();
LiveHandles &liveSessions();
LiveHandles &liveTrainers();

} // namespace tailor::runtime

struct tailor_plan {
  std::shared_ptr<tailor::runtime::LoadedPlan> plan;
  /// Listed once at load, so the names handed out live as long as the plan.
  std::vector<tailor::runtime::StateEntry> states;
};

/// A session shares its plan: tailor_plan_free may come first.
struct tailor_session {
  std::shared_ptr<tailor::runtime::LoadedPlan> plan; // destroyed last
  std::unique_ptr<tailor::runtime::Session> session;
};

/// A trainer shares its plan too (the trainer's run holds it).
struct tailor_trainer {
  std::unique_ptr<tailor::train::Trainer> trainer;
  /// tailor_trainer_last_checkpoint's string.
  std::string lastCheckpoint;
};

namespace tailor::runtime {

inline bool isLive(const tailor_plan *plan) {
  return plan && livePlans().contains(plan);
}
inline bool isLive(const tailor_session *session) {
  return session && liveSessions().contains(session);
}
inline bool isLive(const tailor_trainer *trainer) {
  return trainer && liveTrainers().contains(trainer);
}

/// The errors for a handle argument that is not a live handle.
tailor_status badPlan(const tailor_plan *plan);
tailor_status badSession(const tailor_session *session);
tailor_status badTrainer(const tailor_trainer *trainer);

/// Wraps a loaded plan in a new registered handle.
tailor_plan *newPlanHandle(std::unique_ptr<LoadedPlan> loaded);

/// Describes the tensor named `name` held in plan buffer `buffer`.
tailor_status fillBufferInfo(const LoadedPlan &plan,
                             const flatbuffers::String *name, uint32_t buffer,
                             tailor_tensor_info *info);

/// "[2, 3]".
std::string formatShape(const std::vector<int64_t> &shape);

/// The integer a C caller passed as a tailor_dtype. C lets an enum hold any
/// int; C++ does not (loading a value outside the enumerators' range is
/// undefined), so the argument is read as bytes, never as the enum.
inline int dtypeCode(const tailor_dtype &dtype) {
  static_assert(sizeof(int) == sizeof(tailor_dtype), "tailor_dtype is an int");
  int code;
  std::memcpy(&code, &dtype, sizeof(code));
  return code;
}

/// "f32", or "dtype 77" for a code that names no dtype.
inline std::string dtypeCodeName(int code) {
  return code >= TAILOR_F32 && code <= TAILOR_BOOL
             ? dtypeName(static_cast<DType>(code))
             : "dtype " + std::to_string(code);
}

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_CAPIHANDLES_H
