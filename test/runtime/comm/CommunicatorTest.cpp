//===- CommunicatorTest.cpp - CPU collectives on 2 and 4 ranks ------------===//
//
// Runs under `mpirun -np N` (MPI) and under `torchrun --nproc-per-node N`
// (Gloo), at N = 2 and 4 (label multirank): every operation and dtype against values computed here, in
// place and not, groups split 2 x 2 as hybrid sharding splits them, ZeRO's
// reduce-scatter and in-place all-gather on the world and its nodes, the
// byte counts against the ring formulas, and calls that must fail on every
// rank without hanging; the same for collectives started nonblocking
// (Communicator::start), several in flight at once and completed by
// polling, and mixed with blocking ones; all-to-all (ZeRO++'s quantized
// gradient reduce-scatter) blocking and started. Every rank runs every test; only rank 0 prints
// progress, every rank prints its failures, and the exit status is the
// same on all ranks (a failure anywhere fails them all). The values are the
// same on every rank, so a failure normally stops every rank at the same
// assertion; one that stops a single rank early leaves the others waiting,
// which ctest's timeout ends.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/quant/Half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace tailor::runtime;
using namespace tailor::runtime::comm;

namespace {

Communicator *world = nullptr;

/// Element i of rank r's input: small integers, exact in every dtype (bf16
/// and fp16 hold integers to 256 and 2048), whose sums over 4 ranks are
/// exact too and divisible by the world size (so averages are exact).
double inputValue(int rank, size_t i, int size) {
  return size * ((rank + 1) * static_cast<double>(i % 5) - 3.0 * (i % 2));
}

/// Writes `value` as one element of `dtype` at `out[i]`.
void store(std::vector<uint8_t> &out, DType dtype, size_t i, double value) {
  uint8_t *p = out.data() + i * dtypeSize(dtype);
  switch (dtype) {
  case DType::F32: {
    float v = static_cast<float>(value);
    std::memcpy(p, &v, 4);
    break;
  }
  case DType::F64:
    std::memcpy(p, &value, 8);
    break;
  case DType::BF16: {
    uint16_t v = tailor::quant::floatToBf16(static_cast<float>(value));
    std::memcpy(p, &v, 2);
    break;
  }
  case DType::F16: {
    uint16_t v = tailor::quant::floatToFp16(static_cast<float>(value));
    std::memcpy(p, &v, 2);
    break;
  }
  case DType::I64: {
    auto v = static_cast<int64_t>(value);
    std::memcpy(p, &v, 8);
    break;
  }
  case DType::I32: {
    auto v = static_cast<int32_t>(value);
    std::memcpy(p, &v, 4);
    break;
  }
  case DType::I16: {
    auto v = static_cast<int16_t>(value);
    std::memcpy(p, &v, 2);
    break;
  }
  case DType::I8: {
    auto v = static_cast<int8_t>(value);
    std::memcpy(p, &v, 1);
    break;
  }
  case DType::U8:
  case DType::Bool: {
    auto v = static_cast<uint8_t>(value);
    std::memcpy(p, &v, 1);
    break;
  }
  }
}

double load(const std::vector<uint8_t> &in, DType dtype, size_t i) {
  const uint8_t *p = in.data() + i * dtypeSize(dtype);
  switch (dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case DType::BF16:
  case DType::F16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return dtype == DType::BF16 ? tailor::quant::bf16ToFloat(v)
                                : tailor::quant::fp16ToFloat(v);
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<double>(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case DType::I8: {
    int8_t v;
    std::memcpy(&v, p, 1);
    return v;
  }
  case DType::U8:
  case DType::Bool:
    return p[0];
  }
  return 0;
}

/// Rank `rank`'s input of `count` elements of `dtype`: inputValue, folded
/// into what unsigned and boolean types hold.
double valueFor(DType dtype, int rank, size_t i, int size) {
  double v = inputValue(rank, i, size);
  if (dtype == DType::Bool) {
    return (rank + i) % 3 == 0 ? 1 : 0;
  }
  if (dtype == DType::U8) {
    return std::fabs(v);
  }
  if (dtype == DType::I8) {
    return std::fmod(v, 24.0); // 4 ranks' sums stay within int8
  }
  return v;
}

std::vector<uint8_t> makeInput(DType dtype, int rank, size_t count,
                               int size) {
  std::vector<uint8_t> out(count * dtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    store(out, dtype, i, valueFor(dtype, rank, i, size));
  }
  return out;
}

double reduceExpected(DType dtype, ReduceOp op, size_t i, int size) {
  double sum = 0, high = -1e300, low = 1e300;
  for (int r = 0; r < size; ++r) {
    double v = valueFor(dtype, r, i, size);
    sum += v;
    high = std::max(high, v);
    low = std::min(low, v);
  }
  switch (op) {
  case ReduceOp::Sum:
    return sum;
  case ReduceOp::Avg:
    return sum / size;
  case ReduceOp::Max:
    return high;
  case ReduceOp::Min:
    return low;
  }
  return 0;
}

const DType kAllTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                           DType::I64, DType::I32, DType::I16, DType::I8,
                           DType::U8,  DType::Bool};
const ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max,
                            ReduceOp::Min};

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

/// Whether `op` over `dtype` is a reduction the communicators run.
bool reduces(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Avg) {
    return isFloat(dtype);
  }
  return !(dtype == DType::Bool && op == ReduceOp::Sum);
}

std::string label(DType dtype, ReduceOp op, bool inPlace) {
  const char *ops[] = {"sum", "avg", "max", "min"};
  return std::string(dtypeName(dtype)) + " " + ops[static_cast<int>(op)] +
         (inPlace ? " in place" : "");
}

TEST(Mpi, AllReduceEveryDTypeAndOp) {
  Communicator &c = *world;
  const size_t count = 37;
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      for (bool inPlace : {false, true}) {
        std::vector<uint8_t> send = makeInput(dtype, c.rank(), count, c.size());
        std::vector<uint8_t> recv(send.size(), 0xee);
        std::vector<uint8_t> &out = inPlace ? send : recv;
        std::string error =
            c.allReduce(send.data(), out.data(), count, dtype, op);
        if (!reduces(dtype, op)) {
          EXPECT_NE(error.find("cannot reduce"), std::string::npos)
              << label(dtype, op, inPlace) << ": " << error;
          continue;
        }
        ASSERT_EQ(error, "") << label(dtype, op, inPlace);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(load(out, dtype, i),
                    reduceExpected(dtype, op, i, c.size()))
              << label(dtype, op, inPlace) << " element " << i;
        }
      }
    }
  }
}

TEST(Mpi, ReduceScatterGivesEachRankItsBlock) {
  Communicator &c = *world;
  const size_t block = 5;
  const size_t total = block * static_cast<size_t>(c.size());
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I32}) {
    for (ReduceOp op : kAllOps) {
      if (!reduces(dtype, op)) {
        continue;
      }
      for (bool inPlace : {false, true}) {
        std::vector<uint8_t> send = makeInput(dtype, c.rank(), total, c.size());
        std::vector<uint8_t> recv(block * dtypeSize(dtype), 0xee);
        void *out = inPlace ? send.data() : recv.data();
        ASSERT_EQ(c.reduceScatter(send.data(), out, block, dtype, op), "")
            << label(dtype, op, inPlace);
        std::vector<uint8_t> &result = inPlace ? send : recv;
        for (size_t i = 0; i < block; ++i) {
          size_t global = static_cast<size_t>(c.rank()) * block + i;
          ASSERT_EQ(load(result, dtype, i),
                    reduceExpected(dtype, op, global, c.size()))
              << label(dtype, op, inPlace) << " element " << i;
        }
      }
    }
  }
}

TEST(Mpi, AllGatherEveryDTypeInAndOutOfPlace) {
  Communicator &c = *world;
  const size_t block = 6;
  for (DType dtype : kAllTypes) {
    size_t bytes = block * dtypeSize(dtype);
    std::vector<uint8_t> mine = makeInput(dtype, c.rank(), block, c.size());
    // 0: separate buffers; 1: send == recv (data at the start); 2: MPI's
    // in-place form (data at this rank's block).
    for (int form = 0; form < 3; ++form) {
      std::vector<uint8_t> recv(bytes * c.size(), 0xee);
      const void *send = mine.data();
      if (form == 1) {
        std::memcpy(recv.data(), mine.data(), bytes);
        send = recv.data();
      } else if (form == 2) {
        std::memcpy(recv.data() + bytes * c.rank(), mine.data(), bytes);
        send = recv.data() + bytes * c.rank();
      }
      ASSERT_EQ(c.allGather(send, recv.data(), block, dtype), "")
          << dtypeName(dtype) << " form " << form;
      for (int r = 0; r < c.size(); ++r) {
        for (size_t i = 0; i < block; ++i) {
          ASSERT_EQ(load(recv, dtype, r * block + i),
                    valueFor(dtype, r, i, c.size()))
              << dtypeName(dtype) << " form " << form << " rank " << r;
        }
      }
    }
  }
}

/// ZeRO's step on communicator `c`: reduce-scatter a flat gradient out of
/// place, then all-gather the chunks in place (each rank's chunk already at
/// its block of the bucket), as a ZeRO plan runs them; checked against
/// sums formed here.
void reduceScatterThenGatherInPlace(Communicator &c, int worldRank) {
  const size_t chunk = 7;
  size_t total = chunk * static_cast<size_t>(c.size());
  std::vector<float> gradient(total), mine(chunk, -1.0f), bucket(total, -1.0f);
  for (size_t i = 0; i < total; ++i) {
    gradient[i] = static_cast<float>((worldRank + 1) * 10 + i);
  }
  ASSERT_EQ(c.reduceScatter(gradient.data(), mine.data(), chunk, DType::F32,
                            ReduceOp::Sum),
            "");
  // The group's members' world ranks, from the members themselves.
  std::vector<int> ranks(static_cast<size_t>(c.size()));
  ASSERT_EQ(c.allGather(&worldRank, ranks.data(), 1, DType::I32), "");
  for (size_t i = 0; i < chunk; ++i) {
    size_t global = static_cast<size_t>(c.rank()) * chunk + i;
    float sum = 0;
    for (int r : ranks) {
      sum += static_cast<float>((r + 1) * 10 + global);
    }
    ASSERT_EQ(mine[i], sum) << "element " << i;
  }
  float *ownBlock = bucket.data() + static_cast<size_t>(c.rank()) * chunk;
  std::copy(mine.begin(), mine.end(), ownBlock);
  uint64_t before = c.bytesSent();
  ASSERT_EQ(c.allGather(ownBlock, bucket.data(), chunk, DType::F32), "");
  uint64_t p = static_cast<uint64_t>(c.size());
  EXPECT_EQ(c.bytesSent() - before, (p - 1) * total * sizeof(float) / p);
  for (size_t i = 0; i < total; ++i) {
    float sum = 0;
    for (int r : ranks) {
      sum += static_cast<float>((r + 1) * 10 + i);
    }
    ASSERT_EQ(bucket[i], sum) << "element " << i;
  }
}

TEST(Mpi, ZeroReduceScatterAndInPlaceGatherOnTheWorldAndItsNodes) {
  Communicator &c = *world;
  reduceScatterThenGatherInPlace(c, c.rank());
  // Nodes of 2 (a world of 2 is one node).
  std::string error;
  std::unique_ptr<Communicator> node = c.split(c.rank() / 2, c.rank(), error);
  ASSERT_TRUE(node) << error;
  reduceScatterThenGatherInPlace(*node, c.rank());
}

TEST(Mpi, AllGatherHostGathersWithoutCounting) {
  Communicator &c = *world;
  const size_t block = 5;
  std::vector<double> mine(block), all(block * c.size(), -1.0);
  for (size_t i = 0; i < block; ++i) {
    mine[i] = c.rank() * 100.0 + static_cast<double>(i);
  }
  uint64_t before = c.bytesSent();
  ASSERT_EQ(c.allGatherHost(mine.data(), all.data(), block, DType::F64), "");
  EXPECT_EQ(c.bytesSent(), before);
  for (int r = 0; r < c.size(); ++r) {
    for (size_t i = 0; i < block; ++i) {
      ASSERT_EQ(all[r * block + i], r * 100.0 + static_cast<double>(i));
    }
  }
  // In place: this rank's block already at its place.
  std::vector<double> inPlace(block * c.size(), -1.0);
  std::copy(mine.begin(), mine.end(), inPlace.begin() + c.rank() * block);
  ASSERT_EQ(c.allGatherHost(inPlace.data() + c.rank() * block, inPlace.data(),
                            block, DType::F64),
            "");
  EXPECT_EQ(inPlace, all);
}

TEST(Mpi, BroadcastFromEveryRoot) {
  Communicator &c = *world;
  for (int root = 0; root < c.size(); ++root) {
    for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::Bool}) {
      std::vector<uint8_t> buffer = makeInput(dtype, c.rank(), 9, c.size());
      ASSERT_EQ(c.broadcast(buffer.data(), 9, dtype, root), "");
      for (size_t i = 0; i < 9; ++i) {
        ASSERT_EQ(load(buffer, dtype, i), valueFor(dtype, root, i, c.size()));
      }
    }
  }
}

TEST(Mpi, SendAndRecvAroundARing) {
  Communicator &c = *world;
  int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) %
                                                c.size();
  std::vector<uint8_t> out = makeInput(DType::F32, c.rank(), 11, c.size());
  std::vector<uint8_t> in(out.size(), 0);
  // Even ranks send first, odd ranks receive first: no cycle of waits.
  for (int phase = 0; phase < 2; ++phase) {
    if ((c.rank() % 2 == 0) == (phase == 0)) {
      ASSERT_EQ(c.send(out.data(), 11, DType::F32, next), "");
    } else {
      ASSERT_EQ(c.recv(in.data(), 11, DType::F32, prev), "");
    }
  }
  for (size_t i = 0; i < 11; ++i) {
    ASSERT_EQ(load(in, DType::F32, i), valueFor(DType::F32, prev, i, c.size()));
  }
  EXPECT_EQ(c.barrier(), "");
}

TEST(Mpi, SplitIntoHybridGroups) {
  Communicator &c = *world;
  // Hybrid sharding on 2 "nodes" of 2: shard within a node (color rank / 2),
  // replicate across nodes (color rank % 2).
  std::string error;
  std::unique_ptr<Communicator> node = c.split(c.rank() / 2, c.rank(), error);
  ASSERT_TRUE(node) << error;
  std::unique_ptr<Communicator> across = c.split(c.rank() % 2, c.rank(), error);
  ASSERT_TRUE(across) << error;
  int nodeSize = 0, acrossSize = 0;
  for (int r = 0; r < c.size(); ++r) {
    nodeSize += r / 2 == c.rank() / 2;
    acrossSize += r % 2 == c.rank() % 2;
  }
  EXPECT_EQ(node->size(), nodeSize);
  EXPECT_EQ(node->rank(), c.rank() % 2);
  EXPECT_EQ(across->size(), acrossSize);
  EXPECT_EQ(across->rank(), c.rank() / 2);
  EXPECT_STREQ(node->backend(), c.backend());
  // Sums within each group: ranks' numbers.
  int64_t mine = c.rank(), nodeSum = 0, acrossSum = 0;
  ASSERT_EQ(node->allReduce(&mine, &nodeSum, 1, DType::I64, ReduceOp::Sum),
            "");
  ASSERT_EQ(across->allReduce(&mine, &acrossSum, 1, DType::I64,
                              ReduceOp::Sum),
            "");
  int64_t expectNode = 0, expectAcross = 0;
  for (int r = 0; r < c.size(); ++r) {
    expectNode += r / 2 == c.rank() / 2 ? r : 0;
    expectAcross += r % 2 == c.rank() % 2 ? r : 0;
  }
  EXPECT_EQ(nodeSum, expectNode);
  EXPECT_EQ(acrossSum, expectAcross);
  // A negative color is an error, not MPI_UNDEFINED's null communicator.
  EXPECT_FALSE(c.split(-1, 0, error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
}

TEST(Mpi, BytesSentFollowTheRingFormulas) {
  Communicator &c = *world;
  std::string error;
  // A fresh communicator counts from zero.
  std::unique_ptr<Communicator> fresh = c.split(0, c.rank(), error);
  ASSERT_TRUE(fresh) << error;
  uint64_t p = static_cast<uint64_t>(c.size());
  std::vector<float> buffer(1000 * p, 1.0f);
  uint64_t n = buffer.size() * sizeof(float);
  uint64_t expected = 0;
  ASSERT_EQ(fresh->allReduce(buffer.data(), buffer.data(), buffer.size(),
                             DType::F32, ReduceOp::Sum),
            "");
  expected += 2 * (p - 1) * n / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
  ASSERT_EQ(fresh->reduceScatter(buffer.data(), buffer.data(), 1000,
                                 DType::F32, ReduceOp::Sum),
            "");
  expected += (p - 1) * n / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
  ASSERT_EQ(fresh->allGather(buffer.data(), buffer.data(), 1000, DType::F32),
            "");
  expected += (p - 1) * n / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
  ASSERT_EQ(fresh->broadcast(buffer.data(), 500, DType::F32, 1), "");
  expected += c.rank() == 1 ? 500 * sizeof(float) : 0;
  EXPECT_EQ(fresh->bytesSent(), expected);
  // A 3-element bf16 all-reduce: 2 (p-1)/p of 6 bytes, rounded down.
  uint16_t odd[3] = {0, 0, 0};
  ASSERT_EQ(fresh->allReduce(odd, odd, 3, DType::BF16, ReduceOp::Sum), "");
  expected += 2 * (p - 1) * 6 / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
}

TEST(Mpi, BadCallsFailOnEveryRankWithoutHanging) {
  Communicator &c = *world;
  std::vector<float> buffer(64, 1.0f);
  // A root outside the group.
  std::string error =
      c.broadcast(buffer.data(), 4, DType::F32, c.size());
  EXPECT_NE(error.find("root " + std::to_string(c.size()) +
                       " is not a rank of the group"),
            std::string::npos)
      << error;
  // Counts that differ between ranks: MPI itself may hang on these.
  error = c.allReduce(buffer.data(), buffer.data(), 4 + c.rank() % 2,
                      DType::F32, ReduceOp::Sum);
  EXPECT_NE(error.find("the ranks disagree on the element count"),
            std::string::npos)
      << error;
  error = c.reduceScatter(buffer.data(), buffer.data(), 2, DType::F32,
                          c.rank() == 0 ? ReduceOp::Max : ReduceOp::Sum);
  EXPECT_NE(error.find("the ranks disagree on the operation"),
            std::string::npos)
      << error;
  // Only rank 0 passes a bad root: the others must not wait for it.
  error = c.broadcast(buffer.data(), 4, DType::F32, c.rank() == 0 ? -1 : 0);
  EXPECT_NE(error, "");
  error = c.allGather(buffer.data(), buffer.data() + 8, 4,
                      c.rank() == 0 ? DType::I32 : DType::F32);
  EXPECT_NE(error.find("the ranks disagree on the dtype"), std::string::npos)
      << error;
  // Integer averages and bool sums are errors.
  int32_t ints[2] = {1, 2};
  error = c.allReduce(ints, ints, 2, DType::I32, ReduceOp::Avg);
  EXPECT_NE(error.find("cannot reduce an average of i32"), std::string::npos)
      << error;
  // Errors name the call and the rank.
  EXPECT_NE(error.find("allReduce on rank " + std::to_string(c.rank())),
            std::string::npos)
      << error;
  // After all that, the group still works.
  float one = 1, sum = 0;
  ASSERT_EQ(c.allReduce(&one, &sum, 1, DType::F32, ReduceOp::Sum), "");
  EXPECT_EQ(sum, static_cast<float>(c.size()));
}

/// An all-to-all on `c` of `block` elements a rank of every dtype: block q
/// of rank r's input (elements q * block ...) arrives at rank q as block r.
void allToAllEveryDType(Communicator &c, const size_t block) {
  size_t total = block * static_cast<size_t>(c.size());
  for (DType dtype : kAllTypes) {
    std::vector<uint8_t> send = makeInput(dtype, c.rank(), total, c.size());
    std::vector<uint8_t> recv(send.size(), 0xee);
    ASSERT_EQ(c.allToAll(send.data(), recv.data(), block, dtype), "")
        << dtypeName(dtype);
    for (int r = 0; r < c.size(); ++r) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(load(recv, dtype, r * block + i),
                  valueFor(dtype, r, c.rank() * block + i, c.size()))
            << dtypeName(dtype) << " block from rank " << r;
      }
    }
  }
}

TEST(Mpi, AllToAllSendsEachRankItsBlockOnTheWorldAndItsNodes) {
  Communicator &c = *world;
  allToAllEveryDType(c, 7);
  std::string error;
  std::unique_ptr<Communicator> node = c.split(c.rank() / 2, c.rank(), error);
  ASSERT_TRUE(node) << error;
  allToAllEveryDType(*node, 5);
  // Counted as the cost model's all-to-all: each rank keeps its own block
  // and sends the others, (p-1)/p of the buffer.
  std::unique_ptr<Communicator> fresh = c.split(0, c.rank(), error);
  ASSERT_TRUE(fresh) << error;
  uint64_t p = static_cast<uint64_t>(c.size());
  std::vector<uint8_t> send(1000 * p, 3), recv(1000 * p, 0);
  ASSERT_EQ(fresh->allToAll(send.data(), recv.data(), 1000, DType::U8), "");
  EXPECT_EQ(fresh->bytesSent(), (p - 1) * 1000);
  // Overlapping buffers, and counts that differ, fail on every rank.
  error = c.allToAll(send.data(), send.data(), 1000, DType::U8);
  EXPECT_NE(error.find("allToAll on rank " + std::to_string(c.rank()) +
                       " of " + std::to_string(c.size()) +
                       ": send and recv overlap"),
            std::string::npos)
      << error;
  error = c.allToAll(send.data(), recv.data(), 100 + c.rank() % 2, DType::U8);
  EXPECT_NE(error.find("the ranks disagree on the element count"),
            std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// Started (nonblocking) collectives: Communicator::start
//===----------------------------------------------------------------------===//

/// A call of `kind` over `send` into `recv`, as a plan step gives it.
CollectiveCall callOf(CollectiveKind kind, const void *send, void *recv,
                      size_t inputElements, size_t outputElements,
                      DType dtype, ReduceOp op = ReduceOp::Sum, int root = 0) {
  CollectiveCall call;
  call.kind = kind;
  call.op = op;
  call.input = send;
  call.output = recv;
  call.inputElements = inputElements;
  call.outputElements = outputElements;
  call.dtype = dtype;
  call.root = root;
  return call;
}

/// Polls `pending` until it is done, doing some arithmetic between polls
/// as a session runs kernels between them; "" or its failure.
std::string pollUntilDone(PendingCollective &pending, int &polls) {
  volatile double work = 0;
  for (polls = 1;; ++polls) {
    bool done = false;
    std::string error = pending.test(done);
    if (done) {
      return error;
    }
    for (int i = 0; i < 1000; ++i) {
      work = work + i * 0.5;
    }
  }
}

TEST(Mpi, StartedCollectivesGiveWhatTheBlockingOnesGive) {
  Communicator &c = *world;
  const size_t block = 9;
  const size_t total = block * static_cast<size_t>(c.size());
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      if (!reduces(dtype, op)) {
        continue;
      }
      for (bool inPlace : {false, true}) {
        std::string what = label(dtype, op, inPlace);
        size_t element = dtypeSize(dtype);
        // All four kinds in flight at once, on buffers of their own.
        std::vector<uint8_t> arSend = makeInput(dtype, c.rank(), total,
                                                c.size());
        std::vector<uint8_t> arRecv(arSend.size(), 0xee);
        std::vector<uint8_t> rsSend = makeInput(dtype, c.rank() + 1, total,
                                                c.size());
        std::vector<uint8_t> rsRecv(block * element, 0xee);
        std::vector<uint8_t> agRecv(total * element, 0xee);
        std::vector<uint8_t> agMine = makeInput(dtype, c.rank(), block,
                                                c.size());
        std::memcpy(agRecv.data() + block * element * c.rank(), agMine.data(),
                    block * element);
        std::vector<uint8_t> bcast = makeInput(dtype, c.rank(), block,
                                               c.size());
        int root = c.size() - 1;
        // The blocking calls on copies give the expected results.
        std::vector<uint8_t> arExpected(arSend.size()), rsExpected(
                                                            rsRecv.size());
        std::vector<uint8_t> agExpected(agRecv.size()), bcExpected = bcast;
        ASSERT_EQ(c.allReduce(arSend.data(), arExpected.data(), total, dtype,
                              op),
                  "")
            << what;
        ASSERT_EQ(c.reduceScatter(rsSend.data(), rsExpected.data(), block,
                                  dtype, op),
                  "")
            << what;
        ASSERT_EQ(c.allGather(agMine.data(), agExpected.data(), block, dtype),
                  "")
            << what;
        ASSERT_EQ(c.broadcast(bcExpected.data(), block, dtype, root), "")
            << what;

        std::unique_ptr<PendingCollective> pending[4];
        ASSERT_EQ(c.start(callOf(CollectiveKind::AllReduce, arSend.data(),
                                 inPlace ? arSend.data() : arRecv.data(),
                                 total, total, dtype, op),
                          pending[0]),
                  "")
            << what;
        ASSERT_EQ(c.start(callOf(CollectiveKind::ReduceScatter, rsSend.data(),
                                 inPlace ? rsSend.data() : rsRecv.data(),
                                 total, block, dtype, op),
                          pending[1]),
                  "")
            << what;
        const void *agSend =
            inPlace ? agRecv.data() + block * element * c.rank()
                    : agMine.data();
        ASSERT_EQ(c.start(callOf(CollectiveKind::AllGather, agSend,
                                 agRecv.data(), block, total, dtype),
                          pending[2]),
                  "")
            << what;
        ASSERT_EQ(c.start(callOf(CollectiveKind::Broadcast, bcast.data(),
                                 bcast.data(), block, block, dtype, op, root),
                          pending[3]),
                  "")
            << what;
        // Completed in another order than started, by polling.
        for (int k : {3, 1, 0, 2}) {
          ASSERT_NE(pending[k], nullptr);
          int polls = 0;
          ASSERT_EQ(pollUntilDone(*pending[k], polls), "") << what << " " << k;
          // Done stays done, with the same answer.
          bool done = false;
          EXPECT_EQ(pending[k]->test(done), "");
          EXPECT_TRUE(done);
          EXPECT_EQ(pending[k]->wait(), "");
        }
        const uint8_t *ar = inPlace ? arSend.data() : arRecv.data();
        const uint8_t *rs = inPlace ? rsSend.data() : rsRecv.data();
        EXPECT_EQ(std::memcmp(ar, arExpected.data(), arExpected.size()), 0)
            << what;
        EXPECT_EQ(std::memcmp(rs, rsExpected.data(), rsExpected.size()), 0)
            << what;
        EXPECT_EQ(agRecv, agExpected) << what;
        EXPECT_EQ(bcast, bcExpected) << what;
      }
    }
  }
}

TEST(Mpi, StartedAllGatherMovesABlockGivenAtTheStart) {
  Communicator &c = *world;
  const size_t block = 4;
  std::vector<float> recv(block * c.size(), -1.0f);
  for (size_t i = 0; i < block; ++i) {
    recv[i] = 10.0f * c.rank() + i;
  }
  std::unique_ptr<PendingCollective> pending;
  ASSERT_EQ(c.start(callOf(CollectiveKind::AllGather, recv.data(),
                           recv.data(), block, block * c.size(), DType::F32),
                    pending),
            "");
  ASSERT_EQ(pending->wait(), "");
  for (int r = 0; r < c.size(); ++r) {
    for (size_t i = 0; i < block; ++i) {
      EXPECT_EQ(recv[r * block + i], 10.0f * r + i) << "rank " << r;
    }
  }
}

TEST(Mpi, StartedCollectivesCountTheirBytesWhenComplete) {
  Communicator &c = *world;
  std::string error;
  std::unique_ptr<Communicator> fresh = c.split(0, c.rank(), error);
  ASSERT_TRUE(fresh) << error;
  uint64_t p = static_cast<uint64_t>(c.size());
  std::vector<float> buffer(1000 * p, 1.0f);
  uint64_t n = buffer.size() * sizeof(float);
  std::unique_ptr<PendingCollective> pending;
  ASSERT_EQ(fresh->start(callOf(CollectiveKind::AllReduce, buffer.data(),
                                buffer.data(), buffer.size(), buffer.size(),
                                DType::F32),
                         pending),
            "");
  // Nothing sent is counted before the collective completes (Gloo's start
  // is the blocking call: complete when it returns).
  if (std::string(c.backend()) == "mpi") {
    EXPECT_EQ(fresh->bytesSent(), 0u);
  }
  ASSERT_EQ(pending->wait(), "");
  uint64_t expected = 2 * (p - 1) * n / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
  // Asking again does not count it twice.
  bool done = false;
  ASSERT_EQ(pending->test(done), "");
  EXPECT_EQ(fresh->bytesSent(), expected);
  ASSERT_EQ(fresh->start(callOf(CollectiveKind::ReduceScatter, buffer.data(),
                                buffer.data(), buffer.size(), 1000,
                                DType::F32),
                         pending),
            "");
  ASSERT_EQ(pending->wait(), "");
  expected += (p - 1) * n / p;
  EXPECT_EQ(fresh->bytesSent(), expected);
  ASSERT_EQ(fresh->start(callOf(CollectiveKind::Broadcast, buffer.data(),
                                buffer.data(), 500, 500, DType::F32,
                                ReduceOp::Sum, 1),
                         pending),
            "");
  ASSERT_EQ(pending->wait(), "");
  expected += c.rank() == 1 ? 500 * sizeof(float) : 0;
  EXPECT_EQ(fresh->bytesSent(), expected);
  pending.reset();
}

TEST(Mpi, StartedAllToAllGivesWhatTheBlockingOneGives) {
  Communicator &c = *world;
  std::string error;
  std::unique_ptr<Communicator> fresh = c.split(0, c.rank(), error);
  ASSERT_TRUE(fresh) << error;
  const size_t block = 68; // one int8 wire chunk of 64 elements
  size_t total = block * static_cast<size_t>(c.size());
  std::vector<uint8_t> send = makeInput(DType::U8, c.rank(), total, c.size());
  std::vector<uint8_t> expected(total), got(total, 0xee);
  ASSERT_EQ(fresh->allToAll(send.data(), expected.data(), block, DType::U8),
            "");
  std::unique_ptr<PendingCollective> pending;
  ASSERT_EQ(fresh->start(callOf(CollectiveKind::AllToAll, send.data(),
                                got.data(), total, total, DType::U8),
                         pending),
            "");
  int polls = 0;
  ASSERT_EQ(pollUntilDone(*pending, polls), "");
  EXPECT_EQ(got, expected);
  uint64_t p = static_cast<uint64_t>(c.size());
  EXPECT_EQ(fresh->bytesSent(), 2 * (p - 1) * total / p);
  pending.reset();
}

TEST(Mpi, StartedAndBlockingCallsInterleaveOnOneGroup) {
  Communicator &c = *world;
  std::vector<float> started(64), blocking(64);
  for (size_t i = 0; i < 64; ++i) {
    started[i] = static_cast<float>(c.rank() + i);
    blocking[i] = static_cast<float>(2 * c.rank() + i);
  }
  std::unique_ptr<PendingCollective> pending;
  ASSERT_EQ(c.start(callOf(CollectiveKind::AllReduce, started.data(),
                           started.data(), 64, 64, DType::F32),
                    pending),
            "");
  // A blocking collective while the started one is in flight.
  ASSERT_EQ(c.allReduce(blocking.data(), blocking.data(), 64, DType::F32,
                        ReduceOp::Sum),
            "");
  ASSERT_EQ(pending->wait(), "");
  float ranks = static_cast<float>(c.size() * (c.size() - 1) / 2);
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(started[i], ranks + c.size() * i);
    EXPECT_EQ(blocking[i], 2 * ranks + c.size() * i);
  }
}

TEST(Mpi, BadStartsFailOnEveryRankWithoutHanging) {
  Communicator &c = *world;
  std::vector<float> buffer(64, 1.0f);
  std::unique_ptr<PendingCollective> pending;
  // Counts that differ between ranks.
  std::string error =
      c.start(callOf(CollectiveKind::AllReduce, buffer.data(), buffer.data(),
                     4 + c.rank() % 2, 4 + c.rank() % 2, DType::F32),
              pending);
  EXPECT_NE(error.find("allReduce on rank " + std::to_string(c.rank()) +
                       " of " + std::to_string(c.size()) +
                       ": the ranks disagree on the element count"),
            std::string::npos)
      << error;
  EXPECT_EQ(pending, nullptr);
  // One rank starts what the others call blocking: MPI never matches them
  // (Gloo's start is the blocking call, which matches).
  if (std::string(c.backend()) == "mpi") {
    if (c.rank() == 0) {
      error = c.start(callOf(CollectiveKind::AllReduce, buffer.data(),
                             buffer.data(), 4, 4, DType::F32),
                      pending);
      EXPECT_EQ(pending, nullptr);
    } else {
      error = c.allReduce(buffer.data(), buffer.data(), 4, DType::F32,
                          ReduceOp::Sum);
    }
    EXPECT_NE(error.find("the ranks disagree on the form"), std::string::npos)
        << error;
  }
  // A reduction the communicators do not run, on every rank.
  int32_t ints[2] = {1, 2};
  error = c.start(callOf(CollectiveKind::ReduceScatter, ints, ints, 2,
                         2 / c.size(), DType::I32, ReduceOp::Avg),
                  pending);
  EXPECT_NE(error.find("cannot reduce an average of i32"), std::string::npos)
      << error;
  // Only rank 0 names a root outside the group.
  error = c.start(callOf(CollectiveKind::Broadcast, buffer.data(),
                         buffer.data(), 4, 4, DType::F32, ReduceOp::Sum,
                         c.rank() == 0 ? c.size() : 0),
                  pending);
  EXPECT_NE(error, "");
  EXPECT_EQ(pending, nullptr);
  // The group still works, started or not.
  float one = 1, sum = 0;
  ASSERT_EQ(c.start(callOf(CollectiveKind::AllReduce, &one, &sum, 1, 1,
                           DType::F32),
                    pending),
            "");
  ASSERT_EQ(pending->wait(), "");
  EXPECT_EQ(sum, static_cast<float>(c.size()));
}

/// Prints only rank 0's progress; every rank's failures, prefixed.
class RankPrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankPrinter(int rank) : rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed()) {
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
    }
  }

private:
  int rank;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  LaunchInfo launch;
  if (std::string error = detectLaunch(launch); !error.empty()) {
    std::fprintf(stderr, "CommunicatorTest: %s\n", error.c_str());
    return 1;
  }
  std::string error;
  std::unique_ptr<Communicator> communicator =
      createCpuCommunicator(launch, error);
  if (!communicator) {
    std::fprintf(stderr, "CommunicatorTest: %s\n", error.c_str());
    return 1;
  }
  world = communicator.get();
  if (world->rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankPrinter(world->rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int anyFailed = 0;
  error = world->allReduce(&failed, &anyFailed, 1, DType::I32, ReduceOp::Max);
  world = nullptr;
  communicator.reset(); // finalizes MPI (under mpirun)
  return error.empty() && anyFailed == 0 ? 0 : 1;
}
