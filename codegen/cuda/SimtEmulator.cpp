//===- SimtEmulator.cpp - the fiber scheduler behind SimtEmulator.h -------===//
//
// A launch runs its blocks one after another. A block's threads are fibers
// on stacks carved once from one mapping (with a guard page under each, so
// an overflow faults instead of corrupting a neighbour). The scheduler
// sweeps the block's fibers and resumes each runnable one until it blocks at
// a barrier or a warp collective, or exits; the last thread to arrive at a
// barrier or collective completes it for everyone and carries on. A sweep
// that resumes nobody while threads remain is a deadlock, reported with
// where each stuck thread waits.
//
// On x86-64 the switch is a dozen instructions saving the callee-saved
// registers (glibc's swapcontext also saves the signal mask, a system call
// per switch, and made the emulator 15 times slower); elsewhere, or with
// TAILOR_SIMT_UCONTEXT defined, it is ucontext. Under AddressSanitizer
// every switch is announced to it.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/SimtEmulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(TAILOR_SIMT_UCONTEXT)
#define TL_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

// AddressSanitizer must be told about every stack switch, or it reports
// the fibers' frames as overflows of the scheduler's stack.
#if defined(__SANITIZE_ADDRESS__)
#define TL_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_EMU_ASAN 1
#endif
#endif
#ifdef TL_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace tl::emu {

unsigned char *dynamicSharedBase = nullptr;

namespace {

//===----------------------------------------------------------------------===//
// Registry.
//===----------------------------------------------------------------------===//

std::map<std::string, Thunk> &registry() {
  static std::map<std::string, Thunk> kernels;
  return kernels;
}

//===----------------------------------------------------------------------===//
// Context switching.
//===----------------------------------------------------------------------===//

#ifdef TL_EMU_ASM_SWITCH
// void tlEmuSwitch(void **save, void *load): pushes the callee-saved
// registers, stores the stack pointer in *save, loads `load` and pops the
// same frame from there. The MXCSR and x87 control words are not switched:
// device code never changes rounding modes, and fldcw alone cost more than
// the rest of the switch.
extern "C" void tlEmuSwitch(void **save, void *load);
asm(R"(
  .text
  .p2align 4
  .type tlEmuSwitch, @function
tlEmuSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tlEmuSwitch, .-tlEmuSwitch
)");

struct Context {
  void *sp = nullptr;
};
#else
struct Context {
  ucontext_t uc;
};
#endif

constexpr size_t kStackBytes = 256 * 1024;
constexpr int kMaxThreads = 1024;
/// sm_90's largest opt-in dynamic shared memory per block.
constexpr size_t kMaxSharedBytes = 227 * 1024;
/// What a shuffle from a lane outside the mask returns (a NaN as float).
constexpr uint64_t kPoison = 0xffc0deadffc0deadull;

enum class State : uint8_t { Ready, AtBarrier, AtWarp, Exited };

struct Fiber {
  Context context;
  unsigned char *stackBottom = nullptr;
  unsigned char *stackTop = nullptr;
  /// AddressSanitizer's fake stack of the suspended fiber.
  void *fakeStack = nullptr;
  State state = State::Ready;
  uint3 index{};
  // The collective it waits at, and its part in it.
  WarpOp op = WarpOp::Sync;
  int arg = 0;
  int width = 32;
  unsigned mask = 0;
  uint64_t value = 0;
  uint64_t result = 0;
  float *mmaC = nullptr;
  const unsigned *mmaA = nullptr;
  const unsigned *mmaB = nullptr;
};

struct Emulator {
  std::mutex lock;
  Context scheduler;
  // The scheduler's stack as AddressSanitizer knows it.
  void *schedulerFake = nullptr;
  const void *schedulerBottom = nullptr;
  size_t schedulerSize = 0;
  std::vector<Fiber> fibers;
  unsigned char *stacks = nullptr;
  std::vector<unsigned char> dynamicShared;
  Thunk kernel = nullptr;
  void **args = nullptr;
  int threads = 0;
  int current = -1;
  int atBarrier = 0;
  int exited = 0;
  /// Per warp, the lanes waiting at a collective: a collective is checked
  /// for completion only once every lane of its mask is here.
  unsigned waiting[kMaxThreads / 32] = {};
  std::string error;
};

Emulator theEmulator;
thread_local bool insideLaunch = false;

Emulator &emulator() { return theEmulator; }

std::string dimString(unsigned x, unsigned y, unsigned z) {
  return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " +
         std::to_string(z) + ")";
}

std::string hexMask(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", mask);
  return text;
}

const char *opName(WarpOp op) {
  switch (op) {
  case WarpOp::Sync:
    return "__syncwarp";
  case WarpOp::ShflIdx:
    return "__shfl_sync";
  case WarpOp::ShflUp:
    return "__shfl_up_sync";
  case WarpOp::ShflDown:
    return "__shfl_down_sync";
  case WarpOp::ShflXor:
    return "__shfl_xor_sync";
  case WarpOp::Ballot:
    return "__ballot_sync";
  case WarpOp::Any:
    return "__any_sync";
  case WarpOp::All:
    return "__all_sync";
  case WarpOp::Mma:
    return "tl::mmaBf16";
  case WarpOp::MmaHalf:
    return "tl::mmaHalf";
  }
  return "?";
}

/// "block (1, 0, 0) thread (33, 0, 0)" of the running thread.
std::string where() {
  return "block " + dimString(blockIdx.x, blockIdx.y, blockIdx.z) + " thread " +
         dimString(threadIdx.x, threadIdx.y, threadIdx.z);
}

void switchTo(Context &save, Context &load) {
#ifdef TL_EMU_ASM_SWITCH
  tlEmuSwitch(&save.sp, load.sp);
#else
  swapcontext(&save.uc, &load.uc);
#endif
}

/// Back to the scheduler; returns when the scheduler resumes this fiber.
/// `forever`: the fiber will not be resumed (it exited or failed).
void yieldToScheduler(bool forever = false) {
  Emulator &e = emulator();
  Fiber &f = e.fibers[e.current];
#ifdef TL_EMU_ASAN
  __sanitizer_start_switch_fiber(forever ? nullptr : &f.fakeStack,
                                 e.schedulerBottom, e.schedulerSize);
#endif
  switchTo(f.context, e.scheduler);
#ifdef TL_EMU_ASAN
  __sanitizer_finish_switch_fiber(f.fakeStack, &e.schedulerBottom,
                                  &e.schedulerSize);
#endif
}

/// Runs fiber `f` until it yields.
void resume(Emulator &e, Fiber &f) {
#ifdef TL_EMU_ASAN
  __sanitizer_start_switch_fiber(&e.schedulerFake, f.stackBottom,
                                 size_t(f.stackTop - f.stackBottom));
#endif
  switchTo(e.scheduler, f.context);
#ifdef TL_EMU_ASAN
  __sanitizer_finish_switch_fiber(e.schedulerFake, nullptr, nullptr);
#endif
}

/// Records the launch's error. Callers then halt(), in a statement of its
/// own: the message's temporaries must be destroyed before the fiber stops
/// for good, or they leak.
void setError(std::string message) {
  Emulator &e = emulator();
  if (e.error.empty()) {
    e.error = std::move(message);
  }
}

/// Stops the running fiber: the scheduler sees the error and abandons the
/// block, and the stack is reset for the next one.
[[noreturn]] void halt() {
  for (;;) {
    yieldToScheduler(true);
  }
}

void fiberMain() {
  Emulator &e = emulator();
#ifdef TL_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &e.schedulerBottom,
                                  &e.schedulerSize);
#endif
  e.kernel(e.args);
  e.fibers[e.current].state = State::Exited;
  ++e.exited;
  for (;;) {
    yieldToScheduler(true);
  }
}

/// Prepares fiber `f` to start at fiberMain on its (reused) stack.
void resetFiber(Fiber &f) {
#ifdef TL_EMU_ASM_SWITCH
  // The frame tlEmuSwitch pops: six registers and the return address,
  // above which a fake return slot keeps the System V alignment (rsp = 8
  // mod 16 at function entry).
  auto *top = reinterpret_cast<uint64_t *>(f.stackTop);
  top[-1] = 0;
  top[-2] = reinterpret_cast<uint64_t>(&fiberMain);
  for (int i = 3; i <= 8; ++i) {
    top[-i] = 0;
  }
  f.context.sp = top - 8;
#else
  getcontext(&f.context.uc);
  f.context.uc.uc_stack.ss_sp = f.stackBottom;
  f.context.uc.uc_stack.ss_size = size_t(f.stackTop - f.stackBottom);
  f.context.uc.uc_link = nullptr;
  makecontext(&f.context.uc, &fiberMain, 0);
#endif
  f.state = State::Ready;
  f.fakeStack = nullptr;
}

/// Maps the fiber stacks once, for the largest block CUDA allows.
std::string ensureStacks(Emulator &e) {
  if (e.stacks) {
    return "";
  }
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t slot = kStackBytes + page;
  void *base = mmap(nullptr, slot * kMaxThreads, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return "cannot map the fiber stacks";
  }
  e.stacks = static_cast<unsigned char *>(base);
  e.fibers.resize(kMaxThreads);
  for (int i = 0; i < kMaxThreads; ++i) {
    unsigned char *guard = e.stacks + size_t(i) * slot;
    mprotect(guard, page, PROT_NONE);
    // Stagger the stack tops across cache sets: at one page offset, every
    // switch would evict the previous fibers' frames from L1 and L2.
    e.fibers[i].stackBottom = guard + page;
    e.fibers[i].stackTop = guard + slot - size_t(i % 64) * 64;
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Collectives.
//===----------------------------------------------------------------------===//

/// Lanes in the warp of linear thread `t`, and the first one's index.
void warpOf(const Emulator &e, int t, int &base, int &lanes) {
  base = t & ~31;
  lanes = std::min(32, e.threads - base);
}

/// The value of IEEE half bits (decoded here, not with Device.cuh's
/// halfToFloat, so the emulator checks that too).
float halfValue(unsigned bits) {
  int exponent = int(bits >> 10) & 0x1f;
  int mantissa = int(bits & 0x3ffu);
  float magnitude =
      exponent == 0x1f
          ? (mantissa ? std::numeric_limits<float>::quiet_NaN()
                      : std::numeric_limits<float>::infinity())
          : std::ldexp(float(exponent ? 1024 + mantissa : mantissa),
                       (exponent ? exponent : 1) - 25);
  return bits & 0x8000u ? -magnitude : magnitude;
}

/// D = A B + C for the warp whose lanes start at `lane`, from bf16 or (with
/// `half`) IEEE half fragments. Kept out of line: its 2.5 KiB of matrices
/// would otherwise sit in every collective's frame.
__attribute__((noinline)) void mmaWarp(Fiber *lane, bool half) {
  // PTX's m16n8k16 fragments (lane = 4 g + t): gather A (16 x 16), B
  // (16 x 8) and C (16 x 8), then D = A B + C with the 16-bit products
  // summed exactly in double and rounded once to f32.
  float a[16][16], b[16][8], c[16][8];
  auto value = [half](unsigned bits) {
    return half ? halfValue(bits) : fromBits<float>(uint32_t(bits) << 16);
  };
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    const unsigned *fa = lane[l].mmaA;
    const unsigned *fb = lane[l].mmaB;
    const float *fc = lane[l].mmaC;
    for (int h = 0; h < 2; ++h) {
      a[g][2 * t + h] = value((fa[0] >> (16 * h)) & 0xffffu);
      a[g + 8][2 * t + h] = value((fa[1] >> (16 * h)) & 0xffffu);
      a[g][2 * t + 8 + h] = value((fa[2] >> (16 * h)) & 0xffffu);
      a[g + 8][2 * t + 8 + h] = value((fa[3] >> (16 * h)) & 0xffffu);
      b[2 * t + h][g] = value((fb[0] >> (16 * h)) & 0xffffu);
      b[2 * t + 8 + h][g] = value((fb[1] >> (16 * h)) & 0xffffu);
      c[g][2 * t + h] = fc[h];
      c[g + 8][2 * t + h] = fc[2 + h];
    }
  }
  float d[16][8];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double sum = c[i][j];
      for (int k = 0; k < 16; ++k) {
        sum += double(a[i][k]) * double(b[k][j]);
      }
      d[i][j] = float(sum);
    }
  }
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    float *fc = lane[l].mmaC;
    fc[0] = d[g][2 * t];
    fc[1] = d[g][2 * t + 1];
    fc[2] = d[g + 8][2 * t];
    fc[3] = d[g + 8][2 * t + 1];
  }
}

/// Completes the collective the lanes of `mask` in the warp at `base` all
/// wait at, writing every participant's result.
void complete(Emulator &e, int base, unsigned mask) {
  Fiber *lane = &e.fibers[base];
  WarpOp op = lane[__builtin_ctz(mask)].op;
  switch (op) {
  case WarpOp::Sync:
    break;
  case WarpOp::ShflIdx:
  case WarpOp::ShflUp:
  case WarpOp::ShflDown:
  case WarpOp::ShflXor:
    for (unsigned m = mask; m; m &= m - 1) {
      int i = __builtin_ctz(m);
      int width = lane[i].width;
      int segment = i & ~(width - 1);
      int src = i;
      switch (op) {
      case WarpOp::ShflIdx:
        src = segment + (lane[i].arg & (width - 1));
        break;
      case WarpOp::ShflUp:
        src = i - lane[i].arg >= segment ? i - lane[i].arg : i;
        break;
      case WarpOp::ShflDown:
        src = i + lane[i].arg < segment + width ? i + lane[i].arg : i;
        break;
      default: {
        int j = i ^ lane[i].arg;
        src = j >= segment && j < segment + width ? j : i;
        break;
      }
      }
      lane[i].result = (mask >> src) & 1u ? lane[src].value : kPoison;
    }
    break;
  case WarpOp::Ballot:
  case WarpOp::Any:
  case WarpOp::All: {
    unsigned ballot = 0;
    for (unsigned m = mask; m; m &= m - 1) {
      int i = __builtin_ctz(m);
      ballot |= lane[i].value ? 1u << i : 0u;
    }
    uint64_t result = op == WarpOp::Ballot ? ballot
                      : op == WarpOp::Any  ? uint64_t(ballot != 0)
                                           : uint64_t(ballot == mask);
    for (unsigned m = mask; m; m &= m - 1) {
      lane[__builtin_ctz(m)].result = result;
    }
    break;
  }
  case WarpOp::Mma:
  case WarpOp::MmaHalf:
    mmaWarp(lane, op == WarpOp::MmaHalf);
    break;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    lane[__builtin_ctz(m)].state = State::Ready;
  }
  e.waiting[base / 32] &= ~mask;
}

/// Whether every lane of `mask` waits at a collective with that mask.
bool allArrived(const Emulator &e, int base, unsigned mask) {
  if ((e.waiting[base / 32] & mask) != mask) {
    return false;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    const Fiber &f = e.fibers[base + __builtin_ctz(m)];
    if (f.state != State::AtWarp || f.mask != mask) {
      return false;
    }
  }
  return true;
}

/// Why no thread of the block can run, for the launch's error.
std::string describeDeadlock(const Emulator &e) {
  std::string block = "deadlock in block " +
                      dimString(blockIdx.x, blockIdx.y, blockIdx.z) + ": ";
  if (e.atBarrier > 0 && e.exited > 0) {
    return block + std::to_string(e.atBarrier) +
           " threads wait at __syncthreads() but " + std::to_string(e.exited) +
           " threads of the block have exited (every thread of a block must "
           "reach each barrier; do not return before one)";
  }
  for (int base = 0; base < e.threads; base += 32) {
    int lanes = std::min(32, e.threads - base);
    for (int i = 0; i < lanes; ++i) {
      const Fiber &f = e.fibers[base + i];
      if (f.state != State::AtWarp) {
        continue;
      }
      std::string message = block + "warp " + std::to_string(base / 32) +
                            " lane " + std::to_string(i) + " waits at " +
                            opName(f.op) + " with mask " + hexMask(f.mask);
      for (unsigned m = f.mask; m; m &= m - 1) {
        int j = __builtin_ctz(m);
        const Fiber &g = e.fibers[base + j];
        std::string lane = " but lane " + std::to_string(j);
        if (g.state == State::Exited) {
          return message + lane + " has exited";
        }
        if (g.state == State::AtBarrier) {
          return message + lane + " waits at __syncthreads()";
        }
        if (g.mask != f.mask) {
          return message + lane + " waits at " + opName(g.op) + " with mask " +
                 hexMask(g.mask);
        }
        if (g.op != f.op) {
          return message + lane + " waits at " + opName(g.op);
        }
      }
      return message;
    }
  }
  return block + std::to_string(e.atBarrier) +
         " threads wait at __syncthreads() that the others never reach";
}

/// Forgets the block's suspended fibers. Their frames never return, so
/// under AddressSanitizer their stacks keep poisoned redzones that the next
/// block's frames would trip over.
void abandon(Emulator &e) {
#ifdef TL_EMU_ASAN
  for (int i = 0; i < e.threads; ++i) {
    Fiber &f = e.fibers[i];
    ASAN_UNPOISON_MEMORY_REGION(f.stackBottom,
                                size_t(f.stackTop - f.stackBottom));
  }
#endif
}

/// Runs one block to completion; "" or the error.
std::string runBlock(Emulator &e, bool reverse) {
  for (int i = 0; i < e.threads; ++i) {
    resetFiber(e.fibers[i]);
  }
  e.atBarrier = 0;
  e.exited = 0;
  std::fill(std::begin(e.waiting), std::end(e.waiting), 0u);
  std::fill(e.dynamicShared.begin(), e.dynamicShared.end(), 0xcd);
  unsigned dx = blockDim.x, dxy = blockDim.x * blockDim.y;
  while (e.exited < e.threads) {
    bool progressed = false;
    for (int k = 0; k < e.threads; ++k) {
      int i = reverse ? e.threads - 1 - k : k;
      Fiber &f = e.fibers[i];
      if (f.state != State::Ready) {
        continue;
      }
      threadIdx = {unsigned(i) % dx, (unsigned(i) % dxy) / dx,
                   unsigned(i) / dxy};
      e.current = i;
      resume(e, f);
      e.current = -1;
      if (!e.error.empty()) {
        abandon(e);
        return e.error;
      }
      progressed = true;
    }
    if (!progressed) {
      std::string error = describeDeadlock(e);
      abandon(e);
      return error;
    }
  }
  return "";
}

} // namespace

Registrar::Registrar(const char *name, Thunk fn) { registry()[name] = fn; }

Thunk findKernel(const char *name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

void syncThreads() {
  Emulator &e = emulator();
  Fiber &f = e.fibers[e.current];
  if (++e.atBarrier == e.threads) {
    e.atBarrier = 0;
    for (int i = 0; i < e.threads; ++i) {
      if (e.fibers[i].state == State::AtBarrier) {
        e.fibers[i].state = State::Ready;
      }
    }
    return;
  }
  f.state = State::AtBarrier;
  yieldToScheduler();
}

uint64_t warpCollective(WarpOp op, unsigned mask, uint64_t value, int arg,
                        int width) {
  Emulator &e = emulator();
  int t = e.current;
  int base, lanes;
  warpOf(e, t, base, lanes);
  int lane = t - base;
  if (!((mask >> lane) & 1u)) {
    setError(where() + ": " + opName(op) + " with mask " + hexMask(mask) +
             " excludes the calling lane " + std::to_string(lane));
    halt();
  }
  if (lanes < 32 && (mask >> lanes) != 0) {
    setError(where() + ": " + opName(op) + " with mask " + hexMask(mask) +
             " names lanes missing from the last warp, which has " +
             std::to_string(lanes) + " (blockDim is not a multiple of 32)");
    halt();
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    setError(where() + ": " + opName(op) + " width " + std::to_string(width) +
             " is not a power of two in [1, 32]");
    halt();
  }
  Fiber &f = e.fibers[t];
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.arg = arg;
  f.width = width;
  f.state = State::AtWarp;
  e.waiting[base / 32] |= 1u << lane;
  if (allArrived(e, base, mask)) {
    for (unsigned m = mask; m; m &= m - 1) {
      const Fiber &g = e.fibers[base + __builtin_ctz(m)];
      if (g.op != op) {
        setError(where() + ": lanes of mask " + hexMask(mask) + " meet at " +
                 opName(op) + " and " + opName(g.op));
        halt();
      }
    }
    complete(e, base, mask);
  } else {
    yieldToScheduler();
  }
  return f.result;
}

void mma(float c[4], const unsigned a[4], const unsigned b[2], bool half) {
  Emulator &e = emulator();
  int base, lanes;
  warpOf(e, e.current, base, lanes);
  WarpOp op = half ? WarpOp::MmaHalf : WarpOp::Mma;
  if (lanes != 32) {
    setError(where() + ": " + opName(op) +
             " needs a full warp, the last warp has " + std::to_string(lanes) +
             " lanes");
    halt();
  }
  Fiber &f = e.fibers[e.current];
  f.mmaC = c;
  f.mmaA = a;
  f.mmaB = b;
  warpCollective(op, 0xffffffffu, 0, 0, 32);
}

void trap(const char *what) {
  setError(where() + ": " + what + " called");
  halt();
}

std::string checkLaunch(dim3 grid, dim3 block, size_t sharedBytes) {
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads < 1 || threads > uint64_t(kMaxThreads) || block.z > 64) {
    return "invalid block " + dimString(block.x, block.y, block.z) +
           ": a block has 1 to 1024 threads and blockDim.z <= 64";
  }
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535) {
    return "invalid grid " + dimString(grid.x, grid.y, grid.z) +
           ": extents are 1 to 2^31 - 1 (x) and 1 to 65535 (y, z)";
  }
  if (sharedBytes > kMaxSharedBytes) {
    return "dynamic shared memory of " + std::to_string(sharedBytes) +
           " bytes exceeds the " + std::to_string(kMaxSharedBytes) +
           " a block can have";
  }
  return "";
}

std::string launch(Thunk fn, dim3 grid, dim3 block, size_t sharedBytes,
                   void **args) {
  if (!fn) {
    return "launch of a null kernel";
  }
  if (std::string error = checkLaunch(grid, block, sharedBytes);
      !error.empty()) {
    return error;
  }
  // Device code cannot launch (no dynamic parallelism); on this OS thread
  // the lock below would deadlock.
  if (insideLaunch) {
    return "launch from inside a running kernel";
  }
  Emulator &e = emulator();
  std::lock_guard<std::mutex> guard(e.lock);
  if (std::string error = ensureStacks(e); !error.empty()) {
    return error;
  }
  insideLaunch = true;
  e.kernel = fn;
  e.args = args;
  e.threads = int(block.x * block.y * block.z);
  e.error.clear();
  // 16-byte aligned: a vector's data is malloc'ed, which aligns to 16.
  e.dynamicShared.assign(std::max<size_t>(sharedBytes, 16), 0xcd);
  dynamicSharedBase = e.dynamicShared.data();
  blockDim = block;
  gridDim = grid;
  std::string error;
  uint64_t index = 0;
  for (unsigned z = 0; z < grid.z && error.empty(); ++z) {
    for (unsigned y = 0; y < grid.y && error.empty(); ++y) {
      for (unsigned x = 0; x < grid.x && error.empty(); ++x, ++index) {
        blockIdx = {x, y, z};
        error = runBlock(e, index % 2 == 1);
      }
    }
  }
  dynamicSharedBase = nullptr;
  e.kernel = nullptr;
  e.args = nullptr;
  e.error.clear();
  insideLaunch = false;
  return error;
}

} // namespace tl::emu
