//===- Session.h - a plan bound to memory, ready to run ---------*- C++ -*-===//

#ifndef TAILOR_RUNTIME_SESSION_H
#define TAILOR_RUNTIME_SESSION_H

#include "runtime/HostQueue.h"
#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cuda/CudaBackend.h"

#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::runtime {


/// The call a plan's collective step makes: kind, reduction, element
/// counts, dtype and root; the caller sets the buffers (host or device)
/// and the stream.
comm::CollectiveCall collectiveCallOf(const LoadedPlan &plan,
                                      const plan::Collective &collective);

/// Owns the arenas of one plan (exactly the sizes it names), the bound
/// parameters, and the prepared launches.
class Session {
public:
  /// Allocates arenas, copies constants, binds parameters from their files,
  /// and checks every launch with its kernel. `rank` is the rank of the
  /// plan's world this process is: it places rank-strided buffers (plan
  /// 1.7) and must be the communicator's. Returns null and sets `error`
  /// (and `status`) on failure.
  static std::unique_ptr<Session> create(const LoadedPlan &plan, int threads,
                                         std::string &error, int &status,
                                         int rank = 0);
  ~Session();

  /// Runs the steps of the first entry (an inference plan's whole program)
  /// in order; on failure says which step and why.
  std::string run();

  /// Index of the entry named `name` in the plan, or -1. A plan without
  /// entries has one, `forward`.
  int findEntry(std::string_view name) const;
  /// Runs the steps of entry `index` in order; returns "" or why it failed.
  std::string runEntry(uint32_t index);
  /// Number of entries (at least 1).
  uint32_t entryCount() const { return static_cast<uint32_t>(entries.size()); }

  /// The bytes of buffer `index` (this rank's view of a rank-strided one):
  /// inside a CPU arena, or for a GPU session a host copy made at the first
  /// call. On a GPU, runEntry() uploads the
  /// host copies of the entry's inputs before it runs and refreshes those
  /// of its outputs after; any other copy moves only through download()
  /// and upload().
  void *bufferData(uint32_t index) const;
  /// GPU sessions: refresh the host copy of buffer `index` from the device,
  /// or write it to the device; "" or the failure. No-ops on the CPU.
  std::string download(uint32_t index);
  std::string upload(uint32_t index);
  /// Whether the plan runs on a GPU.
  bool onGpu() const;

  /// One launch as it ran: its index in the plan's ops, and when it started
  /// and ended (seconds since the session was created). A collective
  /// started on a stream other than 0 spans from its start to the moment
  /// the session saw it complete, overlapping the launches between; a wait
  /// that blocked spans the time the compute stream stood still.
  struct LaunchTiming {
    uint32_t step = 0;
    double start = 0;
    double end = 0;
  };
  /// Starts (true) or stops recording every launch's timing; returns "" or
  /// why it cannot (GPU sessions: launches are asynchronous, so a host
  /// clock around them would measure the queue, not the kernel).
  std::string recordTimeline(bool on);
  /// The timings recorded so far, in order; the record is emptied.
  std::vector<LaunchTiming> takeTimeline() { return std::move(timeline); }
  /// Bytes allocated per category (arenas of every kind).
  const CategoryBytes &allocatedBytes() const { return allocated; }
  /// Bytes allocated in the plan's Device arenas, and in its Host and
  /// HostPinned ones. Every arena is its own allocation; on the CPU every
  /// kind is ordinary host memory, its Device arenas being the compute
  /// memory the plan places offloaded tensors apart from.
  uint64_t allocatedDeviceBytes() const { return allocatedDevice; }
  uint64_t allocatedHostBytes() const { return allocatedHost; }
  /// Bytes the plan's copy steps have moved between host and device
  /// arenas so far (HostToDevice and DeviceToHost; copies within one side
  /// are not counted), to compare with the plan's prediction.
  uint64_t bytesCopied() const;

  const LoadedPlan &plan() const { return loaded; }
  /// The rank of the plan's world this session runs as.
  int rank() const { return rankValue; }

  /// The communicator a plan of several ranks runs its collectives on
  /// (runtime/comm/Communicator.h): the world, of the plan's size. The
  /// caller owns it and keeps it alive while the session runs. Every rank
  /// calls this together: the sub-groups the plan's collectives name
  /// (nodes, or the same index across nodes) are split from it here.
  /// Returns "" or why the plan cannot run on it (another world size, or
  /// another rank than the session's).
  std::string setCommunicator(comm::Communicator *communicator);
  comm::Communicator *communicator() const { return comm; }
  /// Bytes this rank's collectives have sent so far, over the world and
  /// every sub-group (as the communicators count them: ring algorithms).
  uint64_t bytesSent() const;
  /// The same, per kind of group (comm/GroupKind.h: "world", "node",
  /// "cross_node").
  std::map<std::string, uint64_t> bytesSentByGroup() const;
  /// This rank's communicator for the plan's (rank 0's) `group` of a
  /// collective or a sharded state: the world's, or the sub-group split
  /// for it by setCommunicator; "" or why there is none.
  std::string groupCommunicator(const std::vector<int> &group,
                                comm::Communicator *&result) const;
  /// This rank's position in its group of the same shape as rank 0's
  /// `group` (sorted): the chunk of a sharded state it holds, and its rank
  /// in that group's communicator. -1 when the group has no shape ranks
  /// other than 0 can tell (see setCommunicator).
  int groupPosition(const std::vector<int> &group) const;

  /// Waits until every point-to-point send this session started (a
  /// pipeline stage's, copied into the plan's `p2p_outbox` arena) has been
  /// received, and empties the outbox; the trainer calls it once a step's
  /// micro-batches are done. "" or the failure of one.
  std::string finishSends();

private:

  explicit Session(const LoadedPlan &plan) : loaded(plan) {}
  /// Allocates the planned arenas, zeroed (on a GPU only the parameter
  /// and constant staging arenas, the rest live on the device); "" or why
  /// not.
  std::string allocateArenas(bool gpu);
  /// A GPU session: the arenas the host filled go up to the device, and the
  /// staging copies are freed.
  std::string uploadToDevice();
  /// Every step of the plan resolved once (CPU): kernels checked, buffers
  /// bound; "" or the first problem, naming the step.
  std::string prepareSteps();
  std::string prepareKernelLaunch(uint32_t step, const plan::Launch &launch);
  std::string bindParameters();
  /// Host bytes of buffer `index` while the session is being created: the
  /// arena itself on the CPU, the staging copy of the parameter and
  /// constant arenas on a GPU.
  void *hostData(uint32_t index) const;
  std::string runEntryOnGpu(uint32_t index);
  /// Fills parameters without a source as their Init says.
  std::string initializeParameters();
  /// What of a parameter's logical tensor this rank binds: elements
  /// [first, first + count) go to element `target` of its buffer. All of
  /// it at 0 for an ordinary parameter; for a ZeRO-3 one (plan 1.7) the
  /// elements that fall in this rank's chunk of the bucket, possibly none.
  struct OwnedElements {
    uint64_t first = 0;
    uint64_t count = 0;
    uint64_t target = 0;
  };
  std::string ownedElements(const plan::Parameter &param,
                            OwnedElements &owned) const;
  /// What binding reuses from one weight to the next: a float weight's
  /// file bytes, their f32 widening, and a sharded quantized parameter's
  /// whole storage. Each holds one parameter's tensor at a time.
  struct BindScratch {
    std::vector<uint8_t> raw;
    std::vector<float> widened;
    std::vector<uint8_t> storage;
  };
  /// Binds a ZeRO-3 quantized parameter (plan 1.7): its whole storage,
  /// quantized from its float source or read from its sections (GPTQ,
  /// checked whole), into `scratch.storage`, then the bytes that fall in
  /// this rank's chunk into the chunk buffer.
  std::string bindShardedStorage(const plan::Parameter &param,
                                 BindScratch &scratch);

  /// A collective step, resolved: the call, and rank 0's group (the
  /// plan's), run on this rank's matching group.
  struct PreparedCollective {
    comm::CollectiveCall call;
    std::vector<int> group;
  };
  std::string runCollective(const PreparedCollective &collective);
  /// A pipeline stage's send: the bytes copied into the outbox, then sent
  /// without waiting for the receiver (so two stages that send to each
  /// other at once cannot deadlock); a receive blocks until its data is in.
  std::string runPointToPoint(const PreparedCollective &collective);

  /// A copy step, resolved to this rank's bytes.
  struct PreparedCopy {
    plan::CopyKind kind = plan::CopyKind::HostToDevice;
    const void *source = nullptr;
    void *target = nullptr;
    size_t bytes = 0;
  };

  /// A step the CPU runs: a kernel launch, a collective (synchronous on
  /// stream 0, started nonblocking on any other), a copy (a memcpy in
  /// program order on any stream: a valid serialization of its stream), or
  /// a record or wait of an event between streams.
  struct PreparedLaunch {
    enum class Kind { Kernel, Collective, Copy, Record, Wait };
    Kind kind = Kind::Kernel;
    /// Null unless a kernel launch.
    const KernelDef *kernel = nullptr;
    std::unique_ptr<PreparedCollective> collective;
    /// Copy: its bytes.
    PreparedCopy copy;
    KernelCall call;
    std::string origin;
    uint32_t step = 0; // index in the plan's ops
    /// The stream it runs on, records or waits on.
    uint32_t stream = 0;
    /// A kernel on a Host stream: queued on the host's thread (plan 1.16),
    /// or, in older plans, run after all work in flight.
    bool onHostStream = false;
    /// Record and Wait: the event.
    uint32_t event = 0;
    /// Plan Op.steps: runs only while *stepValue (the entry's `step`
    /// input) is in [firstStep, lastStep] (lastStep -1: no end); null,
    /// always.
    const int64_t *stepValue = nullptr;
    int64_t firstStep = 0;
    int64_t lastStep = -1;
    /// Plan Op.steps_period: of those, only first, first + period, ...
    int64_t stepPeriod = 1;
  };
  /// Step `step`, a collective, with its buffers resolved.
  PreparedLaunch prepareCollective(uint32_t step,
                                   const plan::Collective &collective) const;
  /// Step `step`, a copy, with its buffers resolved.
  PreparedLaunch prepareCopy(uint32_t step, const plan::Copy &copy) const;
  /// Op `step`'s training steps (plan Op.steps) into `prepared`: its
  /// entry's `step` input and the range; "" or what is malformed.
  std::string prepareStepRange(uint32_t step, PreparedLaunch &prepared);
  /// Runs copy `index`: ordered after the collectives in flight it shares
  /// bytes with (orderAfterInFlight), then copied and counted.
  std::string runCopy(size_t index);
  /// "step N (kernel, origin)": how errors name launch `index`.
  std::string describeStep(size_t index) const;
  /// Runs launches [first, last) on the CPU, then completes every
  /// collective they started; "" or the first failure.
  std::string runSteps(size_t first, size_t last);
  std::string runStep(size_t index);
  /// Runs `body` for launch `index`, timed for the timeline and profile.
  template <typename Body> std::string timed(size_t index, Body body);
  /// Seconds since the session was created.
  double now() const;

  /// A collective started on a stream other than 0 whose completion the
  /// compute stream has not waited for yet (it may be done already).
  struct InFlight {
    std::unique_ptr<comm::PendingCollective> pending;
    size_t launch = 0;     // index in `launches`
    uint64_t sequence = 0; // its place among its stream's starts
    bool done = false;
    /// The stream whose wait completed it, -1 while none has: what that
    /// stream runs next is ordered after it.
    int64_t waitedOn = -1;
    double started = 0, finished = 0;
    size_t timelineSlot = SIZE_MAX;
  };
  /// Where an event stands: the stream that last recorded it, and how many
  /// collectives that stream had started by then.
  struct EventMark {
    uint32_t stream = 0;
    uint64_t started = 0;
  };
  /// Orders collective or copy `index` after the collectives in flight it
  /// shares bytes with: those of its own stream complete first (stream
  /// order); one of another stream its stream has not waited for is a race
  /// in the plan, an error.
  std::string orderAfterInFlight(size_t index);
  /// Starts collective `index` on its stream.
  std::string startCollective(size_t index);
  /// Tests every collective in flight once, so MPI moves their data while
  /// the kernels run; "" or the failure of one, naming its step.
  std::string pollInFlight();
  /// Marks `flight` done (test or wait said so), timing its slice.
  void settle(InFlight &flight);
  /// Blocks until `flight` completes; "" or its failure, naming its step.
  std::string complete(InFlight &flight);
  /// Wait step `index`: completes what its event stands for.
  std::string waitEvent(size_t index);
  /// "" unless kernel launch `index` touches a buffer a collective in
  /// flight writes (the plan waits for it too late).
  std::string checkNoRace(size_t index) const;
  /// Completes every collective in flight and every host launch queued at
  /// the end of an entry; "" or the first failure, naming its step.
  std::string completeAll();
  /// Host launch `index` (plan 1.16) queued on the host's thread.
  std::string submitHost(size_t index);
  /// Blocks until the first `count` host launches have run; they are no
  /// longer in flight for the compute stream.
  std::string waitHost(uint64_t count);
  /// "" unless step `index` (a kernel or a copy) shares bytes with a host
  /// launch the compute stream has not waited for.
  std::string checkNoHostRace(size_t index) const;

  struct EntryRange {
    std::string name;
    uint32_t first = 0;
    uint32_t count = 0;
  };

  const LoadedPlan &loaded;
  int rankValue = 0;
  /// The `p2p_outbox` arena (-1: the plan has none), how much of it this
  /// step's sends hold, and the sends in flight.
  int64_t outboxArena = -1;
  uint64_t outboxUsed = 0;
  std::vector<std::unique_ptr<comm::PendingCollective>> pendingSends;
  comm::Communicator *comm = nullptr;
  /// Sub-groups split from `comm`, keyed by this rank's members.
  std::map<std::vector<int>, std::unique_ptr<comm::Communicator>> subgroups;
  std::vector<void *> arenas;
  std::unique_ptr<cuda::CudaBackend> cuda;
  /// Host copies of GPU buffers handed out by bufferData(), 8-byte aligned.
  mutable std::map<uint32_t, std::vector<uint64_t>> mirrors;
  CategoryBytes allocated{};
  uint64_t allocatedDevice = 0;
  uint64_t allocatedHost = 0;
  /// CPU sessions: bytes moved by host<->device copies so far.
  uint64_t copiedBytes = 0;
  std::unique_ptr<ThreadPool> pool;
  std::vector<PreparedLaunch> launches;
  std::vector<EntryRange> entries;
  /// TAILOR_PROFILE=1: seconds and calls per kernel, printed to stderr when
  /// the session ends (the place to look before optimizing a kernel).
  bool profile = false;
  std::vector<double> profileSeconds;
  std::vector<uint64_t> profileCalls;
  /// Started collectives (TAILOR_PROFILE): seconds from start to
  /// completion, summed, and how many; the host's own time in them counts
  /// in profileSeconds.
  double profileOverlapSeconds = 0;
  uint64_t profileOverlapCalls = 0;
  /// recordTimeline(true): every launch's timing, from `epoch`.
  bool recording = false;
  std::vector<LaunchTiming> timeline;
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  /// CPU streams while an entry runs: collectives in flight in start order,
  /// collectives started per stream, and each event's mark. Declared last:
  /// what is in flight goes before the communicators it runs on.
  std::vector<InFlight> inFlight;
  std::vector<uint64_t> startedOn;
  std::vector<EventMark> marks;
  /// Plan 1.16's Host stream: its launches run on hostQueue's thread, over
  /// hostPool's workers, beside the session's own; null for older plans,
  /// whose host launches run inline once everything in flight is done.
  /// Host launches queued that the compute stream has not waited for (the
  /// launch, its count in the queue), and their timings, written by the
  /// host's thread and read once it has run them. Declared last: the
  /// queue's thread reads everything above until it stops.
  std::unique_ptr<ThreadPool> hostPool;
  std::vector<std::pair<size_t, uint64_t>> hostInFlight;
  std::deque<LaunchTiming> hostTimings;
  std::unique_ptr<HostQueue> hostQueue;
};

} // namespace tailor::runtime

#endif // TAILOR_RUNTIME_SESSION_H
