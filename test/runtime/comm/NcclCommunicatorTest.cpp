//===- NcclCommunicatorTest.cpp - NCCL collectives on one GPU -------------===//
//
// The NCCL communicator at world size 1, on a real GPU (ctest gpu.*, run by
// bench/gpu/run.sh; without a GPU every test skips, saying why). A world of
// one is what a single GPU can check: every call reaches NCCL (init, the
// collectives on a stream of our own, split, the host staging in pieces,
// finalize, the all-to-all's grouped sends), results are checked against
// values formed here, bytesSent follows the ring formulas at p = 1 (nothing leaves the rank), and both
// launches start (a plain process, torchrun's variables). Several ranks need a GPU each (NcclCommunicator.cpp takes
// GPU LOCAL_RANK): the MPI tests (CommunicatorTest) cover the semantics of
// several ranks on the CPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/quant/Half.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::runtime::comm;

namespace {

/// Device memory freed when it goes out of scope.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    if (cudaMalloc(&memory, bytes) != cudaSuccess) {
      memory = nullptr;
    }
  }
  ~DeviceBuffer() { cudaFree(memory); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  char *data() const { return static_cast<char *>(memory); }
  void upload(const std::vector<uint8_t> &host, size_t offset = 0) {
    ASSERT_EQ(cudaMemcpy(data() + offset, host.data(), host.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<uint8_t> download(size_t offset, size_t count) const {
    std::vector<uint8_t> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), data() + offset, count,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

private:
  void *memory = nullptr;
  size_t bytes;
};

/// Element i as bytes of `dtype`: small integers, exact in every type.
std::vector<uint8_t> values(DType dtype, size_t count, int seed) {
  std::vector<uint8_t> out(count * dtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    double v = static_cast<double>((i * 7 + static_cast<size_t>(seed)) % 23) -
               11.0;
    uint8_t *at = out.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
      break;
    }
    case DType::F64:
      std::memcpy(at, &v, 8);
      break;
    case DType::BF16: {
      uint16_t h = tailor::quant::floatToBf16(static_cast<float>(v));
      std::memcpy(at, &h, 2);
      break;
    }
    case DType::F16: {
      uint16_t h = tailor::quant::floatToFp16(static_cast<float>(v));
      std::memcpy(at, &h, 2);
      break;
    }
    case DType::I32: {
      int32_t n = static_cast<int32_t>(v);
      std::memcpy(at, &n, 4);
      break;
    }
    case DType::I64: {
      int64_t n = static_cast<int64_t>(v);
      std::memcpy(at, &n, 8);
      break;
    }
    default:
      *at = static_cast<uint8_t>(static_cast<int>(v) & 0xff);
      break;
    }
  }
  return out;
}

class NcclWorldOfOne : public ::testing::Test {
protected:
  void SetUp() override {
    LaunchInfo launch; // a plain process
    std::string error;
    comm = createNcclCommunicator(launch, error);
    if (!comm) {
      GTEST_SKIP() << "no NCCL communicator on this machine: " << error;
    }
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  }
  void TearDown() override {
    if (stream) {
      cudaStreamDestroy(stream);
    }
  }
  std::string finish() { return comm->synchronize(stream); }

  std::unique_ptr<Communicator> comm;
  cudaStream_t stream = nullptr;
};

const DType kReducedTypes[] = {DType::F32, DType::F64, DType::BF16,
                               DType::F16, DType::I32, DType::I64};

TEST_F(NcclWorldOfOne, IsNcclRankZeroOfOne) {
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_STREQ(comm->backend(), "nccl");
}

TEST_F(NcclWorldOfOne, AllReduceOfOneRankIsItsInput) {
  const size_t count = 1001;
  for (DType dtype : kReducedTypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max,
                        ReduceOp::Min}) {
      bool integer = dtype == DType::I32 || dtype == DType::I64;
      if (integer && op == ReduceOp::Avg) {
        std::vector<uint8_t> host = values(dtype, 4, 0);
        DeviceBuffer b(host.size());
        EXPECT_NE(comm->allReduce(b.data(), b.data(), 4, dtype, op, stream)
                      .find("cannot reduce an average"),
                  std::string::npos);
        continue;
      }
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " op " +
                     std::to_string(static_cast<int>(op)) +
                     (inPlace ? " in place" : ""));
        std::vector<uint8_t> host = values(dtype, count, 3);
        DeviceBuffer send(host.size()), recv(host.size());
        send.upload(host);
        void *out = inPlace ? send.data() : recv.data();
        ASSERT_EQ(comm->allReduce(send.data(), out, count, dtype, op, stream),
                  "");
        ASSERT_EQ(finish(), "");
        EXPECT_EQ((inPlace ? send : recv).download(0, host.size()), host);
      }
    }
  }
}

TEST_F(NcclWorldOfOne, ReduceScatterAndAllGatherAsZeroRunsThem) {
  // ZeRO's step through runCollective, the call the CUDA backend makes:
  // reduce-scatter a bucket out of place, then all-gather the chunk in
  // place (the chunk already at this rank's block).
  const size_t chunk = 333;
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    size_t bytes = chunk * dtypeSize(dtype);
    std::vector<uint8_t> grads = values(dtype, chunk, 5);
    DeviceBuffer bucket(bytes), shard(bytes);
    bucket.upload(grads);
    CollectiveCall scatter;
    scatter.kind = CollectiveKind::ReduceScatter;
    scatter.op = ReduceOp::Avg;
    scatter.input = bucket.data();
    scatter.output = shard.data();
    scatter.inputElements = chunk;
    scatter.outputElements = chunk;
    scatter.dtype = dtype;
    scatter.stream = stream;
    ASSERT_EQ(runCollective(*comm, scatter), "");
    CollectiveCall gather;
    gather.kind = CollectiveKind::AllGather;
    gather.input = shard.data();
    gather.output = shard.data();
    gather.inputElements = chunk;
    gather.outputElements = chunk;
    gather.dtype = dtype;
    gather.stream = stream;
    ASSERT_EQ(runCollective(*comm, gather), "");
    ASSERT_EQ(finish(), "");
    EXPECT_EQ(shard.download(0, bytes), grads);
    // In place: send == recv.
    ASSERT_EQ(comm->reduceScatter(bucket.data(), bucket.data(), chunk, dtype,
                                  ReduceOp::Sum, stream),
              "");
    ASSERT_EQ(finish(), "");
    EXPECT_EQ(bucket.download(0, bytes), grads);
  }
}

TEST_F(NcclWorldOfOne, MovedTypesTravelAsBytes) {
  // All-gather and broadcast move any dtype (i16 and bool as bytes).
  for (DType dtype : {DType::I16, DType::Bool, DType::U8, DType::I8,
                      DType::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    std::vector<uint8_t> host = values(dtype, 17, 1);
    DeviceBuffer a(host.size()), b(host.size());
    a.upload(host);
    ASSERT_EQ(comm->allGather(a.data(), b.data(), 17, dtype, stream), "");
    ASSERT_EQ(comm->broadcast(a.data(), 17, dtype, 0, stream), "");
    ASSERT_EQ(finish(), "");
    EXPECT_EQ(b.download(0, host.size()), host);
    EXPECT_EQ(a.download(0, host.size()), host);
  }
  DeviceBuffer scratch(16);
  EXPECT_NE(comm->broadcast(scratch.data(), 4, DType::F32, 1, stream)
                .find("root 1 is not a rank of the group"),
            std::string::npos);
}

TEST_F(NcclWorldOfOne, AllToAllOfOneRankKeepsItsBlock) {
  // ZeRO++'s qgZ exchange through runCollective (grouped ncclSend and
  // ncclRecv to itself): the one block arrives unchanged, nothing is
  // counted as sent, and overlapping buffers are refused.
  std::vector<uint8_t> wire = values(DType::U8, 136, 3);
  DeviceBuffer in(wire.size()), out(wire.size());
  in.upload(wire);
  CollectiveCall exchange;
  exchange.kind = CollectiveKind::AllToAll;
  exchange.input = in.data();
  exchange.output = out.data();
  exchange.inputElements = wire.size();
  exchange.outputElements = wire.size();
  exchange.dtype = DType::U8;
  exchange.stream = stream;
  uint64_t before = comm->bytesSent();
  ASSERT_EQ(runCollective(*comm, exchange), "");
  ASSERT_EQ(finish(), "");
  EXPECT_EQ(out.download(0, wire.size()), wire);
  EXPECT_EQ(comm->bytesSent(), before);
  EXPECT_NE(comm->allToAll(in.data(), in.data(), wire.size(), DType::U8,
                           stream)
                .find("send and recv overlap"),
            std::string::npos);
}

TEST_F(NcclWorldOfOne, HostCallsStageThroughTheGpu) {
  float sums[3] = {1.5f, -2.0f, 7.0f}, out[3] = {0, 0, 0};
  ASSERT_EQ(comm->allReduceHost(sums, out, 3, DType::F32, ReduceOp::Sum), "");
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(sums, sums + 3));
  // More than one 16 MiB piece: the gather goes in pieces.
  const size_t count = (size_t(40) << 20) / sizeof(float) + 3;
  std::vector<float> mine(count), all(count, -1.0f);
  for (size_t i = 0; i < count; ++i) {
    mine[i] = static_cast<float>(i % 1000);
  }
  uint64_t before = comm->bytesSent();
  ASSERT_EQ(comm->allGatherHost(mine.data(), all.data(), count, DType::F32),
            "");
  EXPECT_EQ(all, mine);
  EXPECT_EQ(comm->bytesSent(), before);
  EXPECT_EQ(comm->barrier(), "");
}

TEST_F(NcclWorldOfOne, NothingLeavesARankOfOne) {
  // The ring formulas at p = 1: 2 (p-1)/p n and (p-1)/p n are 0.
  DeviceBuffer b(4096);
  ASSERT_EQ(comm->allReduce(b.data(), b.data(), 1024, DType::F32,
                            ReduceOp::Sum, stream),
            "");
  ASSERT_EQ(comm->reduceScatter(b.data(), b.data(), 1024, DType::F32,
                                ReduceOp::Sum, stream),
            "");
  ASSERT_EQ(comm->allGather(b.data(), b.data(), 1024, DType::F32, stream), "");
  ASSERT_EQ(comm->broadcast(b.data(), 1024, DType::F32, 0, stream), "");
  ASSERT_EQ(finish(), "");
  EXPECT_EQ(comm->bytesSent(), 0u);
}

TEST_F(NcclWorldOfOne, SplitMakesAGroupOfOne) {
  std::string error;
  std::unique_ptr<Communicator> node = comm->split(0, 0, error);
  ASSERT_TRUE(node) << error;
  EXPECT_EQ(node->size(), 1);
  EXPECT_STREQ(node->backend(), "nccl");
  int64_t mine = 42, sum = 0;
  ASSERT_EQ(node->allReduceHost(&mine, &sum, 1, DType::I64, ReduceOp::Sum), "");
  EXPECT_EQ(sum, 42);
  EXPECT_FALSE(comm->split(-1, 0, error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
}

TEST(NcclBootstrap, ATorchrunLaunchOfOneStarts) {
  // torchrun's variables with one rank (no rendezvous needed alone).
  LaunchInfo launch;
  launch.launcher = "torchrun";
  launch.masterAddr = "127.0.0.1";
  launch.masterPort = 29500;
  std::string error;
  std::unique_ptr<Communicator> comm = createNcclCommunicator(launch, error);
  if (!comm) {
    GTEST_SKIP() << "no NCCL communicator on this machine: " << error;
  }
  EXPECT_EQ(comm->size(), 1);
  float one = 1, sum = 0;
  ASSERT_EQ(comm->allReduceHost(&one, &sum, 1, DType::F32, ReduceOp::Sum), "");
  EXPECT_EQ(sum, 1.0f);
}

TEST(NcclBootstrap, ALocalRankWithoutItsGpuIsAnError) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no NCCL communicator on this machine: no GPU";
  }
  LaunchInfo launch;
  launch.launcher = "torchrun";
  launch.worldSize = devices + 1;
  launch.rank = devices;
  launch.localRank = devices;
  launch.localWorldSize = devices + 1;
  launch.masterAddr = "127.0.0.1";
  launch.masterPort = 29999;
  std::string error;
  EXPECT_FALSE(createNcclCommunicator(launch, error));
  EXPECT_NE(error.find("is local rank " + std::to_string(devices) +
                       " but this node has " + std::to_string(devices)),
            std::string::npos)
      << error;
}

} // namespace
