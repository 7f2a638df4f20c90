//===- HostQueue.cpp - the host stream's own thread -----------------------===//

#include "runtime/HostQueue.h"

namespace tailor::runtime {

HostQueue::HostQueue() : worker([this] { work(); }) {}

HostQueue::~HostQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_one();
  worker.join();
}

uint64_t HostQueue::submit(Task task) {
  uint64_t count;
  {
    std::lock_guard<std::mutex> lock(mutex);
    tasks.push_back(std::move(task));
    count = ++submittedCount;
  }
  queued.notify_one();
  return count;
}

uint64_t HostQueue::submitted() const {
  std::lock_guard<std::mutex> lock(mutex);
  return submittedCount;
}

std::string HostQueue::waitFor(uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return finishedCount >= count; });
  std::string reported;
  reported.swap(failure);
  return reported;
}

void HostQueue::work() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    queued.wait(lock, [&] { return stopping || !tasks.empty(); });
    if (tasks.empty()) {
      return; // stopping, and everything queued has run
    }
    Task task = std::move(tasks.front());
    tasks.pop_front();
    lock.unlock();
    std::string problem = task();
    lock.lock();
    if (failure.empty() && !problem.empty()) {
      failure = std::move(problem);
    }
    ++finishedCount;
    finished.notify_all();
  }
}

} // namespace tailor::runtime
