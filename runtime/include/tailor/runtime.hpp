//===- runtime.hpp - header-only C++17 wrapper over the runtime C API -----===//
//
// For applications: RAII handles and std::vector/std::string in place of the
// C API's out-parameters. Nothing here throws unless asked to: fallible calls
// return a tailor::Status or a tailor::Expected<T>, and valueOrThrow() /
// throwIfError() turn a failure into a tailor::RuntimeError for code that
// prefers exceptions.
//
//   auto plan = tailor::Plan::load("m.tplan");
//   if (!plan.ok()) { std::cerr << plan.error().message() << "\n"; return 1; }
//   auto session = tailor::Session::create(*plan);
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_HPP
#define TAILOR_RUNTIME_HPP

#include "tailor/runtime.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tailor {

/// The element type's NumPy-style name ("float32", "int64", "bfloat16").
inline const char *dtypeName(tailor_dtype dtype) {
  // Indexed by the enum, whose values are the plan format's and never change.
  static const char *const kNames[] = {
      "float32", "float64", "float16", "bfloat16", "int64",
      "int32",   "int16",   "int8",    "uint8",    "bool"};
  unsigned index = static_cast<unsigned>(dtype);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

/// Bytes per element (0 for a value outside the enum).
inline size_t dtypeSize(tailor_dtype dtype) {
  static const size_t kSizes[] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
  unsigned index = static_cast<unsigned>(dtype);
  return index < std::size(kSizes) ? kSizes[index] : 0;
}

/// Thrown by throwIfError() and valueOrThrow(); never by the runtime itself.
class RuntimeError : public std::runtime_error {
public:
  RuntimeError(tailor_status code, const std::string &message)
      : std::runtime_error(message), code_(code) {}
  tailor_status code() const { return code_; }

private:
  tailor_status code_;
};

/// The outcome of a call: TAILOR_OK, or a failure code and its message.
class Status {
public:
  /// Success.
  Status() = default;
  Status(tailor_status code, std::string message)
      : code_(code), message_(std::move(message)) {}
  /// `code` with tailor_last_error()'s message when it is a failure.
  static Status fromCall(tailor_status code) {
    return code == TAILOR_OK ? Status() : Status(code, tailor_last_error());
  }

  bool ok() const { return code_ == TAILOR_OK; }
  explicit operator bool() const { return ok(); }
  tailor_status code() const { return code_; }
  const std::string &message() const { return message_; }
#if defined(__cpp_exceptions)
  /// Throws a RuntimeError carrying this failure; does nothing on success.
  void throwIfError() const {
    if (!ok()) {
      throw RuntimeError(code_, message_);
    }
  }
#endif

private:
  tailor_status code_ = TAILOR_OK;
  std::string message_;
};

/// A T or the Status saying why there is none (a small std::expected).
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status error) : error_(std::move(error)) {
    assert(!error_.ok() && "an Expected without a value needs a failure");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  /// Why there is no value (a success Status when there is one).
  const Status &error() const { return error_; }

  /// The value; only when ok().
  T &value() & {
    assert(ok());
    return *value_;
  }
  const T &value() const & {
    assert(ok());
    return *value_;
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
#if defined(__cpp_exceptions)
  /// Moves the value out, or throws a RuntimeError with the failure.
  T valueOrThrow() && {
    error_.throwIfError();
    return std::move(*value_);
  }
#endif

private:
  std::optional<T> value_;
  Status error_;
};

/// A plan input or output.
struct TensorInfo {
  std::string name;
  tailor_dtype dtype = TAILOR_F32;
  std::vector<int64_t> shape;
  /// Bytes of the dense row-major tensor.
  uint64_t bytes = 0;
  /// The entry (tailor_plan_entry_name) that reads or writes it.
  int entry = 0;

  static TensorInfo fromC(const tailor_tensor_info &info) {
    int rank = info.rank < 0 ? 0 : std::min(info.rank, TAILOR_MAX_RANK);
    return {info.name ? info.name : "", info.dtype,
            std::vector<int64_t>(info.shape, info.shape + rank), info.bytes, 0};
  }
};

/// A loaded, verified plan. Copies share one immutable plan, which may be used
/// from several threads; it is freed with the last copy and last Session.
class Plan {
public:
  /// Loads and verifies the plan file at `path`.
  static Expected<Plan> load(const std::string &path) {
    tailor_plan *plan = nullptr;
    if (tailor_status s = tailor_plan_load(path.c_str(), &plan);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return Plan(plan);
  }
  /// Loads a plan held in memory; relative weight paths resolve against
  /// `baseDir` (the current directory when empty).
  static Expected<Plan> loadFromMemory(const void *data, size_t size,
                                       const std::string &baseDir = "") {
    tailor_plan *plan = nullptr;
    if (tailor_status s = tailor_plan_load_from_memory(
            data, size, baseDir.empty() ? nullptr : baseDir.c_str(), &plan);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return Plan(plan);
  }

  std::vector<TensorInfo> inputs() const {
    return collect(tailor_plan_input_count(get()), tailor_plan_input_info,
                   tailor_plan_input_entry);
  }
  std::vector<TensorInfo> outputs() const {
    return collect(tailor_plan_output_count(get()), tailor_plan_output_info,
                   tailor_plan_output_entry);
  }
  /// Entry names, in order ("forward", or "train_step", "optimizer_step").
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (int i = 0; i < tailor_plan_entry_count(get()); ++i) {
      names.emplace_back(tailor_plan_entry_name(get(), i));
    }
    return names;
  }
  /// The memory the plan predicts a session will allocate.
  Expected<tailor_memory_report> memory() const {
    tailor_memory_report report{};
    if (tailor_status s = tailor_plan_memory(get(), &report); s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return report;
  }

  /// The parameters and training states by logical name.
  std::vector<tailor_parameter_info> parameters() const {
    std::vector<tailor_parameter_info> infos;
    for (int i = 0; i < tailor_plan_parameter_count(get()); ++i) {
      tailor_parameter_info info{};
      if (tailor_plan_parameter_info(get(), i, &info) == TAILOR_OK) {
        infos.push_back(info);
      }
    }
    return infos;
  }
  std::vector<tailor_state_info> states() const {
    std::vector<tailor_state_info> infos;
    for (int i = 0; i < tailor_plan_state_count(get()); ++i) {
      tailor_state_info info{};
      if (tailor_plan_state_info(get(), i, &info) == TAILOR_OK) {
        infos.push_back(info);
      }
    }
    return infos;
  }

  const tailor_plan *get() const { return plan_.get(); }
  /// The shared owner, for handles that must keep the plan alive.
  const std::shared_ptr<tailor_plan> &shared() const { return plan_; }

private:
  explicit Plan(tailor_plan *plan) : plan_(plan, tailor_plan_free) {}

  using InfoFn = tailor_status (*)(const tailor_plan *, int,
                                   tailor_tensor_info *);
  using EntryFn = int (*)(const tailor_plan *, int);
  std::vector<TensorInfo> collect(int count, InfoFn fn, EntryFn entryOf) const {
    std::vector<TensorInfo> infos;
    for (int i = 0; i < count; ++i) {
      tailor_tensor_info info{};
      if (fn(get(), i, &info) == TAILOR_OK) {
        infos.push_back(TensorInfo::fromC(info));
        infos.back().entry = entryOf(get(), i);
      }
    }
    return infos;
  }

  std::shared_ptr<tailor_plan> plan_;
};

/// An output inside a session's arenas: valid until the next run() or until
/// the Session is destroyed.
struct OutputView {
  const void *data = nullptr;
  TensorInfo info;
};

/// A plan bound to memory. Move-only; used by one thread at a time. It keeps
/// its plan alive, so a Session may outlive the Plan it was made from.
class Session {
public:
  /// Allocates the plan's arenas and binds its parameters; `numThreads` 0
  /// picks the plan's target threads or the machine's cores.
  static Expected<Session> create(const Plan &plan, int numThreads = 0) {
    tailor_session_options options{};
    options.num_threads = numThreads;
    tailor_session *session = nullptr;
    if (tailor_status s = tailor_session_create(plan.get(), &options, &session);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return Session(plan.shared(), session);
  }

  /// Copies input `name` (dtype and shape must be the plan's).
  Status setInput(const std::string &name, tailor_dtype dtype,
                  const std::vector<int64_t> &shape, const void *data,
                  size_t bytes) {
    return Status::fromCall(tailor_session_set_input(
        session_.get(), name.c_str(), dtype, shape.data(),
        static_cast<int>(shape.size()), data, bytes));
  }
  /// Runs the plan's steps once.
  Status run() { return Status::fromCall(tailor_session_run(session_.get())); }
  /// Runs one entry of a plan by name.
  Status runEntry(const std::string &name) {
    return Status::fromCall(tailor_session_run_entry(session_.get(), name.c_str()));
  }

  Expected<OutputView> output(const std::string &name) const {
    OutputView view;
    tailor_tensor_info info{};
    if (tailor_status s = tailor_session_output(session_.get(), name.c_str(),
                                                &view.data, &info);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    view.info = TensorInfo::fromC(info);
    return view;
  }
  /// The bytes the session's arenas actually hold.
  Expected<tailor_memory_report> memory() const {
    tailor_memory_report report{};
    if (tailor_status s = tailor_session_memory(session_.get(), &report);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return report;
  }

  /// Writes parameter `name` from caller memory (tailor_session_set_parameter).
  Status setParameter(const std::string &name, tailor_dtype dtype,
                      const std::vector<int64_t> &shape, const void *data,
                      size_t bytes) {
    return Status::fromCall(tailor_session_set_parameter(
        session_.get(), name.c_str(), dtype, shape.data(),
        static_cast<int>(shape.size()), data, bytes));
  }
  /// Loads the parameters a safetensors file names; how many.
  Expected<int> loadSafetensors(const std::string &path) {
    int loaded = 0;
    if (tailor_status s = tailor_session_load_safetensors(
            session_.get(), path.c_str(), &loaded);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return loaded;
  }
  /// Applies a PEFT LoRA adapter directory (tailor_session_apply_adapter).
  Status applyAdapter(const std::string &dir) {
    return Status::fromCall(
        tailor_session_apply_adapter(session_.get(), dir.c_str()));
  }

  tailor_session *get() const { return session_.get(); }

private:
  // Frees the session, then drops its reference to the plan: the C API wants
  // sessions freed before their plan, also when a Session is move-assigned.
  struct Deleter {
    std::shared_ptr<tailor_plan> plan;
    void operator()(tailor_session *session) const {
      tailor_session_free(session);
    }
  };

  Session(std::shared_ptr<tailor_plan> plan, tailor_session *session)
      : session_(session, Deleter{std::move(plan)}) {}

  std::unique_ptr<tailor_session, Deleter> session_;
};

/// A training run (tailor_trainer). Move-only; used by one thread at a time,
/// except requestStop(). It keeps its plan alive.
class Trainer {
public:
  /// Called after each step of run(); return true to stop after it.
  using Callback = std::function<bool(const tailor_train_metrics &)>;

  /// `options` as tailor_trainer_options_init, then the caller's changes.
  static Expected<Trainer> create(const Plan &plan,
                                  const tailor_trainer_options &options) {
    tailor_trainer *trainer = nullptr;
    if (tailor_status s = tailor_trainer_create(plan.get(), &options, &trainer);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return Trainer(trainer);
  }
  /// Default options for `dataPath` and `outputDir` (borrowed: they must
  /// outlive create(), which copies them).
  static tailor_trainer_options options(const char *dataPath,
                                        const char *outputDir) {
    tailor_trainer_options options;
    tailor_trainer_options_init(&options);
    options.data_path = dataPath;
    options.output_dir = outputDir;
    return options;
  }

  /// Trains one optimizer step.
  Expected<tailor_train_metrics> step() {
    tailor_train_metrics metrics{};
    if (tailor_status s = tailor_trainer_step(get(), &metrics);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return metrics;
  }
  /// Trains to max_steps or a stop; the final weights at max_steps.
  Status run(const Callback &callback = {}) {
    if (!callback) {
      return Status::fromCall(tailor_trainer_run(get(), nullptr, nullptr));
    }
    // No exception may cross the C library: one from the callback stops the
    // run and is rethrown after it.
    struct Context {
      const Callback *callback = nullptr;
#if defined(__cpp_exceptions)
      std::exception_ptr error;
#endif
    } context;
    context.callback = &callback;
    auto trampoline = [](const tailor_train_metrics *metrics,
                         void *user) -> int {
      auto *ctx = static_cast<Context *>(user);
#if defined(__cpp_exceptions)
      try {
        return (*ctx->callback)(*metrics) ? 1 : 0;
      } catch (...) {
        ctx->error = std::current_exception();
        return 1;
      }
#else
      return (*ctx->callback)(*metrics) ? 1 : 0;
#endif
    };
    Status status =
        Status::fromCall(tailor_trainer_run(get(), trampoline, &context));
#if defined(__cpp_exceptions)
    if (context.error) {
      std::rethrow_exception(context.error);
    }
#endif
    return status;
  }
  /// The validation loss of the current weights.
  Expected<double> evaluate() {
    double loss = 0;
    if (tailor_status s = tailor_trainer_evaluate(get(), &loss);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return loss;
  }
  /// Writes DIR/checkpoint-<step> (the trainer's output dir when empty);
  /// its path.
  Expected<std::string> saveCheckpoint(const std::string &dir = "") {
    if (tailor_status s = tailor_trainer_save_checkpoint(
            get(), dir.empty() ? nullptr : dir.c_str());
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return std::string(tailor_trainer_last_checkpoint(get()));
  }
  Status resume(const std::string &checkpoint = "latest") {
    return Status::fromCall(tailor_trainer_resume(get(), checkpoint.c_str()));
  }
  /// Writes the PEFT adapter (or model) of the current weights into `dir`.
  Status exportTo(const std::string &dir) {
    return Status::fromCall(tailor_trainer_export(get(), dir.c_str()));
  }
  Status requestStop() {
    return Status::fromCall(tailor_trainer_request_stop(get()));
  }
  Expected<tailor_trainer_state> state() const {
    tailor_trainer_state state{};
    if (tailor_status s = tailor_trainer_get_state(get(), &state);
        s != TAILOR_OK) {
      return Status::fromCall(s);
    }
    return state;
  }

  tailor_trainer *get() const { return trainer_.get(); }

private:
  explicit Trainer(tailor_trainer *trainer)
      : trainer_(trainer, tailor_trainer_free) {}

  std::unique_ptr<tailor_trainer, void (*)(tailor_trainer *)> trainer_;
};

} // namespace tailor

#endif // TAILOR_RUNTIME_HPP
