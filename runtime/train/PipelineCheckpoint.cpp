//===- PipelineCheckpoint.cpp - one checkpoint from every pipeline stage --===//
//
// A layer split's stages each hold their own layers' trainable tensors, but
// a checkpoint (and the PEFT adapter) is one set of files keyed by logical
// names, so it moves between a layer split and a single rank. Each rank
// therefore also keeps host copies of the other stages' slots:
//
// - joinStageLayouts, once: every rank all-gathers the descriptions of its
//   own slots (list, name, file name, dtype, shape) and adds the others' as
//   slots of their stage, backed by host memory owned by the layout; the
//   fingerprint then covers every stage, as the unsplit plan's does.
// - gatherStageSlots, before anything is written: every rank all-gathers
//   the bytes of its own parameters and states (gradient accumulators are
//   zero at a step boundary and not saved), so the leader writes them all.
// - Reading needs nothing: every rank reads the whole checkpoint, its own
//   slots into the session, the others' into their copies.
//
// The all-gathers go through the communicator's host form, padded to the
// largest rank's bytes (the stages differ), over the ranks of this rank's
// replica (plan 1.13: with data-parallel replicas of the stages, every
// replica holds the same tensors, so each gathers its own stages; a rank's
// position there is its stage).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"
#include "runtime/train/TensorFiles.h"

#include "runtime/Session.h"
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cstring>

namespace tailor::train {

namespace {

constexpr const char *kLists[] = {"parameter", "state", "gradient"};

std::vector<TensorSlot> *listOf(CheckpointLayout &layout, int list) {
  return list == 0 ? &layout.parameters
         : list == 1 ? &layout.states
                     : &layout.gradients;
}

/// "list<TAB>name<TAB>file name<TAB>transposed<TAB>dtype<TAB>dims..." per
/// own slot, one a line.
std::string describeOwnSlots(CheckpointLayout &layout) {
  std::string text;
  for (int list = 0; list < 3; ++list) {
    for (const TensorSlot &slot : *listOf(layout, list)) {
      if (slot.stage >= 0) {
        continue;
      }
      text += std::to_string(list) + "\t" + slot.name + "\t" +
              slot.exportName + "\t" + (slot.transposed ? "1" : "0") + "\t" +
              std::to_string(static_cast<int>(slot.dtype));
      for (int64_t dim : slot.shape) {
        text += "\t" + std::to_string(dim);
      }
      text += "\n";
    }
  }
  return text;
}

/// Every rank's `own` bytes: the sizes first, then each padded to the
/// largest.
std::string allGatherBlobs(runtime::comm::Communicator &comm,
                           const std::string &own,
                           std::vector<std::string> &blobs) {
  int ranks = comm.size();
  std::vector<int64_t> sizes(static_cast<size_t>(ranks));
  int64_t mine = static_cast<int64_t>(own.size());
  if (std::string problem =
          comm.allGatherHost(&mine, sizes.data(), 1, runtime::DType::I64);
      !problem.empty()) {
    return problem;
  }
  int64_t largest = 1;
  for (int64_t size : sizes) {
    largest = std::max(largest, size);
  }
  std::string padded = own;
  padded.resize(static_cast<size_t>(largest), '\0');
  std::string all(static_cast<size_t>(largest * ranks), '\0');
  if (std::string problem =
          comm.allGatherHost(padded.data(), all.data(),
                             static_cast<size_t>(largest), runtime::DType::U8);
      !problem.empty()) {
    return problem;
  }
  blobs.clear();
  for (int r = 0; r < ranks; ++r) {
    blobs.push_back(all.substr(static_cast<size_t>(r * largest),
                               static_cast<size_t>(sizes[r])));
  }
  return "";
}

/// Splits `line` at tabs.
std::vector<std::string> fields(const std::string &line) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    parts.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos) {
      return parts;
    }
    start = tab + 1;
  }
}

/// Adds stage `stage`'s slots described in `text` to the layout.
std::string addStageSlots(CheckpointLayout &layout, int stage,
                          const std::string &text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::vector<std::string> parts = fields(text.substr(start, end - start));
    start = end + 1;
    if (parts.size() < 5) {
      return "stage " + std::to_string(stage) +
             " described a checkpoint slot badly";
    }
    TensorSlot slot;
    slot.name = parts[1];
    slot.exportName = parts[2];
    slot.transposed = parts[3] == "1";
    slot.dtype = static_cast<runtime::DType>(std::stoi(parts[4]));
    for (size_t i = 5; i < parts.size(); ++i) {
      slot.shape.push_back(std::stoll(parts[i]));
    }
    slot.stage = stage;
    layout.stageCopies.emplace_back((slot.bytes() + 7) / 8, 0);
    slot.data = layout.stageCopies.back().data();
    listOf(layout, std::stoi(parts[0]))->push_back(std::move(slot));
  }
  return "";
}

/// The communicator over this rank's replica's stages (the world without
/// replicas); "" or why there is none.
std::string pipelineCommunicator(const runtime::Session &session,
                                 runtime::comm::Communicator *&comm) {
  const auto &p = session.plan().root();
  int replicas = p.pipeline() ? std::max(1, p.pipeline()->replicas()) : 1;
  std::vector<int> group;
  for (int r = p.rank() % replicas; r < p.world_size(); r += replicas) {
    group.push_back(r);
  }
  return session.groupCommunicator(group, comm);
}

} // namespace

std::string joinStageLayouts(const runtime::Session &session,
                             CheckpointLayout &layout) {
  runtime::comm::Communicator *comm = nullptr;
  if (!session.communicator()) {
    return "a layer split's checkpoint needs the other stages' ranks (no "
           "communicator)";
  }
  if (std::string problem = pipelineCommunicator(session, comm);
      !problem.empty()) {
    return "checkpoint layout of the stages: " + problem;
  }
  std::vector<std::string> blobs;
  if (std::string problem =
          allGatherBlobs(*comm, describeOwnSlots(layout), blobs);
      !problem.empty()) {
    return "checkpoint layout of the stages: " + problem;
  }
  for (int r = 0; r < static_cast<int>(blobs.size()); ++r) {
    if (r == comm->rank()) {
      continue;
    }
    if (std::string problem = addStageSlots(layout, r, blobs[r]);
        !problem.empty()) {
      return problem;
    }
  }
  layout.stages = static_cast<int>(blobs.size());
  computeFingerprint(layout);
  return "";
}

std::string gatherStageSlots(const runtime::Session &session,
                             CheckpointLayout &layout) {
  runtime::comm::Communicator *comm = nullptr;
  if (std::string problem = pipelineCommunicator(session, comm);
      !problem.empty()) {
    return "checkpoint tensors of the stages: " + problem;
  }
  std::string own;
  for (int list = 0; list < 2; ++list) {
    for (const TensorSlot &slot : *listOf(layout, list)) {
      if (slot.stage < 0) {
        own.append(static_cast<const char *>(slot.data), slot.bytes());
      }
    }
  }
  std::vector<std::string> blobs;
  if (std::string problem = allGatherBlobs(*comm, own, blobs);
      !problem.empty()) {
    return "checkpoint tensors of the stages: " + problem;
  }
  for (int r = 0; r < static_cast<int>(blobs.size()); ++r) {
    if (r == comm->rank()) {
      continue;
    }
    size_t at = 0;
    for (int list = 0; list < 2; ++list) {
      for (TensorSlot &slot : *listOf(layout, list)) {
        if (slot.stage != r) {
          continue;
        }
        if (at + slot.bytes() > blobs[r].size()) {
          return std::string("stage ") + std::to_string(r) + " sent fewer " +
                 kLists[list] + " bytes than its layout holds";
        }
        std::memcpy(slot.data, blobs[r].data() + at, slot.bytes());
        at += slot.bytes();
      }
    }
  }
  return "";
}

} // namespace tailor::train
