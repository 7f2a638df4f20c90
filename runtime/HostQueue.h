//===- HostQueue.h - the host stream's own thread ---------------*- C++ -*-===//
//
// A plan's Host stream (format 1.16: optimizer offload's updates) runs
// beside the others. A HostQueue is its thread: tasks handed to it run in
// order while the caller goes on issuing the rest of the step, and the
// caller waits only where the plan waits for the host stream's events.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_HOSTQUEUE_H
#define TAILOR_RUNTIME_HOSTQUEUE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tailor::runtime {

class HostQueue {
public:
  /// A task returns "" or what went wrong.
  using Task = std::function<std::string()>;

  HostQueue();
  /// Runs what is queued, then stops the thread.
  ~HostQueue();
  HostQueue(const HostQueue &) = delete;
  HostQueue &operator=(const HostQueue &) = delete;

  /// Queues `task` after the others; returns how many tasks have been
  /// queued so far, this one included (the count a wait names).
  uint64_t submit(Task task);
  /// Tasks queued so far.
  uint64_t submitted() const;
  /// Blocks until the first `count` tasks have run; returns "" or the
  /// first failure of a task not reported before (a failed task does not
  /// stop the ones after it: each one's inputs are the plan's to order).
  std::string waitFor(uint64_t count);

private:
  void work();

  mutable std::mutex mutex;
  std::condition_variable queued, finished;
  std::deque<Task> tasks;
  uint64_t submittedCount = 0;
  uint64_t finishedCount = 0;
  std::string failure;
  bool stopping = false;
  std::thread worker;
};

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_HOSTQUEUE_H
