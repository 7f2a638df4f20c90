//===- ThreadPool.cpp - worker threads, attributes and dtype helpers ------===//
//
// A forward pass launches thousands of kernels, most of them a few tens of
// microseconds long, so handing a loop to the workers has to cost far less
// than that. Workers therefore spin on an epoch counter for a short while
// after each job (catching the next launch without a futex round trip) and
// only then sleep on a condition variable. The caller runs chunks too and,
// once none are left, closes the job and waits for the workers still inside
// it.
//
// Joining a job is lock-free: a worker announces itself in `active`, then
// re-reads the epoch; the caller closes the epoch, then reads `active`.
// Both pairs are sequentially consistent, so either the worker sees the job
// closed and backs off, or the caller sees the worker and waits for it. A
// worker that is counted in `active` under an open epoch may read the job's
// fields, which the caller rewrites only after `active` drops to zero.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tailor::runtime {

//===----------------------------------------------------------------------===//
// DType and Attributes
//===----------------------------------------------------------------------===//

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I16:
    return "i16";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  }
  return "unknown";
}

const Attribute *Attributes::find(std::string_view name) const {
  for (const Attribute &attr : attrs) {
    if (attr.name == name) {
      return &attr;
    }
  }
  return nullptr;
}

int64_t Attributes::getInt(std::string_view name, int64_t fallback) const {
  const Attribute *attr = find(name);
  return attr && attr->kind == Attribute::Kind::Int ? attr->i : fallback;
}

double Attributes::getFloat(std::string_view name, double fallback) const {
  const Attribute *attr = find(name);
  if (!attr) {
    return fallback;
  }
  if (attr->kind == Attribute::Kind::Float) {
    return attr->f;
  }
  if (attr->kind == Attribute::Kind::Int) {
    return static_cast<double>(attr->i);
  }
  return fallback;
}

std::vector<int64_t> Attributes::getInts(std::string_view name) const {
  const Attribute *attr = find(name);
  return attr && attr->kind == Attribute::Kind::Ints ? attr->ints
                                                     : std::vector<int64_t>();
}

std::string Attributes::getString(std::string_view name,
                                  std::string fallback) const {
  const Attribute *attr = find(name);
  return attr && attr->kind == Attribute::Kind::String ? attr->s : fallback;
}

//===----------------------------------------------------------------------===//
// ThreadPool
//===----------------------------------------------------------------------===//

namespace {

/// Tells the core we are spinning (frees the sibling hyperthread).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// How long an idle worker keeps spinning before it sleeps: longer than the
/// gap between two kernels of a step, short enough that a pool idling
/// between steps (or while BLAS runs its own threads) stops burning cores.
constexpr auto kSpinTime = std::chrono::microseconds(100);

/// Chunks per runner: a few per thread lets early finishers take work from
/// uneven loops (causal attention) without shrinking chunks much.
constexpr int64_t kChunksPerRunner = 4;

/// Set while a thread runs chunks of some pool's job, so a nested
/// parallelFor runs inline instead of deadlocking on its own pool.
thread_local bool insideJob = false;

} // namespace

struct ThreadPool::Impl {
  // The current job; written by the caller only while no worker is active.
  const std::function<void(int64_t, int64_t, int)> *fn = nullptr;
  int64_t n = 0;
  int64_t numChunks = 0;
  int maxRunners = 0;
  alignas(64) std::atomic<int64_t> nextChunk{0};
  alignas(64) std::atomic<int> nextRunner{0};
  alignas(64) std::atomic<int> active{0};
  /// Odd while a job is open; each job advances it by two.
  alignas(64) std::atomic<uint64_t> epoch{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};

  std::mutex sleepMutex;
  std::condition_variable wake;
  /// Serializes callers on different threads.
  std::mutex submitMutex;
  std::vector<std::thread> threads;

  void runChunks(int runner) {
    insideJob = true;
    for (;;) {
      int64_t c = nextChunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= numChunks) {
        break;
      }
      // Even split: every chunk holds floor or ceil of n / numChunks items.
      int64_t begin = c * n / numChunks;
      int64_t end = (c + 1) * n / numChunks;
      (*fn)(begin, end, runner);
    }
    insideJob = false;
  }

  /// Whether `e` is an open epoch this worker has not served yet.
  static bool isNewJob(uint64_t e, uint64_t served) {
    return (e & 1) && e != served;
  }

  void workerLoop() {
    uint64_t served = 0;
    for (;;) {
      uint64_t e = epoch.load();
      if (!isNewJob(e, served) && !stop.load()) {
        auto deadline = std::chrono::steady_clock::now() + kSpinTime;
        for (unsigned spins = 1;; ++spins) {
          e = epoch.load();
          if (isNewJob(e, served) || stop.load()) {
            break;
          }
          cpuRelax();
          if (spins % 256 == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
              break;
            }
            // Oversubscribed machines: let the caller's thread run.
            std::this_thread::yield();
          }
        }
      }
      if (!isNewJob(e, served) && !stop.load()) {
        std::unique_lock<std::mutex> lock(sleepMutex);
        sleepers.fetch_add(1);
        while (!isNewJob(e = epoch.load(), served) && !stop.load()) {
          wake.wait(lock);
        }
        sleepers.fetch_sub(1);
      }
      if (stop.load()) {
        return;
      }
      active.fetch_add(1);
      if (epoch.load() != e) {
        // Closed (or replaced) between our two reads: not ours to touch.
        active.fetch_sub(1);
        continue;
      }
      served = e;
      int runner = nextRunner.fetch_add(1, std::memory_order_relaxed);
      if (runner < maxRunners) {
        runChunks(runner);
      }
      active.fetch_sub(1, std::memory_order_release);
    }
  }
};

ThreadPool::ThreadPool(int threads)
    : impl(new Impl), threadCount(std::max(1, threads)) {
  impl->threads.reserve(threadCount - 1);
  for (int i = 1; i < threadCount; ++i) {
    impl->threads.emplace_back([this] { impl->workerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl->sleepMutex);
    impl->stop.store(true);
  }
  impl->wake.notify_all();
  for (std::thread &t : impl->threads) {
    t.join();
  }
  delete impl;
}

void ThreadPool::parallelFor(
    int64_t n, int64_t grain,
    const std::function<void(int64_t begin, int64_t end, int worker)> &fn,
    int maxWorkers) {
  if (n <= 0) {
    return;
  }
  grain = std::max<int64_t>(grain, 1);
  int workers =
      maxWorkers > 0 ? std::min(maxWorkers, threadCount) : threadCount;
  // Chunks hold at least `grain` items, so at most n / grain of them.
  int64_t maxChunks = std::max<int64_t>(n / grain, 1);
  int runners = static_cast<int>(std::min<int64_t>(workers, maxChunks));
  if (runners <= 1 || insideJob) {
    fn(0, n, 0);
    return;
  }

  Impl &p = *impl;
  std::lock_guard<std::mutex> submit(p.submitMutex);
  p.fn = &fn;
  p.n = n;
  p.numChunks = std::min<int64_t>(maxChunks, runners * kChunksPerRunner);
  p.maxRunners = runners;
  p.nextChunk.store(0, std::memory_order_relaxed);
  p.nextRunner.store(1, std::memory_order_relaxed);
  p.epoch.fetch_add(1); // open
  if (p.sleepers.load() > 0) {
    std::lock_guard<std::mutex> lock(p.sleepMutex);
    p.wake.notify_all();
  }

  p.runChunks(0);

  p.epoch.fetch_add(1); // closed: no new joiners
  // Each worker's release decrement heads a release sequence the later
  // decrements continue, so reading 0 here acquires every worker's writes.
  for (unsigned spins = 1; p.active.load() != 0; ++spins) {
    cpuRelax();
    if (spins % 64 == 0) {
      std::this_thread::yield();
    }
  }
}

} // namespace tailor::runtime
