//===- Hardware.cpp - built-in hardware table and hardware files ----------===//

#include "compiler/Hardware.h"
#include "compiler/HardwareFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <optional>

using namespace llvm;

namespace tailor {

namespace {

constexpr uint64_t kGB = 1000ull * 1000 * 1000;
constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

/// Dense tensor-core rates and memory figures from ../shared/FORMATS.md.
/// Consumer cards' rates are with fp32 accumulation, which is what tailor's
/// GEMMs use.
HardwareSpec builtin(StringRef name) {
  HardwareSpec h;
  h.name = name.str();
  h.backend = "cuda";
  h.launchOverheadUs = 4;
  // Host copies: what pinned-memory transfers reach over the card's PCIe
  // generation (about 80% of the x16 link): gen5 50, gen4 25, gen3 12 GB/s.
  auto gpu = [&](int64_t sm, uint64_t memory, double bf16, double fp32,
                 double bandwidth, double link, const char *linkKind,
                 double hostLink) {
    h.sm = sm, h.memoryBytes = memory, h.bf16Tflops = bf16,
    h.fp32Tflops = fp32, h.memoryBandwidthGBs = bandwidth, h.linkGBs = link,
    h.link = linkKind, h.hostLinkGBs = hostLink;
    // Servers built around NVLink cards have two sockets of DDR5; a
    // workstation's or cloud instance's PCIe card, one socket's share.
    h.hostMemoryGBs = link >= 300 ? 100 : 40;
  };
  if (name == "h100" || name == "h100-sxm") {
    gpu(90, 80 * kGB, 989, 67, 3350, 450, "nvlink4", 50);
  } else if (name == "h100-pcie") {
    gpu(90, 80 * kGB, 756, 51, 2000, 64, "pcie5", 50);
  } else if (name == "h200") {
    gpu(90, 141 * kGB, 989, 67, 4800, 450, "nvlink4", 50);
  } else if (name == "a100-80gb" || name == "a100") {
    gpu(80, 80 * kGB, 312, 19.5, 2040, 300, "nvlink3", 25);
  } else if (name == "a100-40gb") {
    gpu(80, 40 * kGB, 312, 19.5, 1560, 300, "nvlink3", 25);
  } else if (name == "l4") {
    gpu(89, 24 * kGB, 121, 30.3, 300, 32, "pcie4", 25);
  } else if (name == "a10g") {
    gpu(86, 24 * kGiB, 125, 31.2, 600, 32, "pcie4", 25);
  } else if (name == "rtx4090") {
    gpu(89, 24 * kGiB, 165, 82.6, 1010, 32, "pcie4", 25);
  } else if (name == "rtx3090") {
    gpu(86, 24 * kGiB, 71, 35.6, 936, 32, "pcie4", 25);
  } else if (name == "t4") {
    gpu(75, 16 * kGiB, 65, 8.1, 320, 16, "pcie3", 12);
  } else if (name == "cpu") {
    // A generic x86-64 core with two 256-bit FMA units: ~80 GFLOP/s fp32
    // peak at 2.5 GHz, of which a BLAS GEMM sustains most; one socket's
    // DRAM bandwidth. `tailor calibrate` replaces both with measurements.
    h.backend = "cpu";
    h.cpuGflopsPerThread = 60;
    // OpenBLAS spreads a large GEMM well over a socket's cores; one of a
    // few MFLOP (a LoRA factor, a short sequence's projection) splits
    // into few blocks and pays the threads' hand-off each call.
    h.cpuParallelEfficiency = 0.9;
    h.cpuParallelHalfMflop = 20;
    h.memoryBandwidthGBs = 20;
    h.launchOverheadUs = 1;
    // CPU ranks of one machine talk through MPI's shared memory: a copy in
    // and out of a shared segment, about half the DRAM bandwidth.
    h.linkGBs = 10;
    h.link = "shm";
    h.linkLatencyUs = 2;
    // "Device" and host memory are the same DRAM: a memcpy reads and
    // writes it.
    h.hostLinkGBs = 10;
    h.hostMemoryGBs = h.memoryBandwidthGBs;
  } else {
    h.name.clear();
  }
  return h;
}

/// The network between the nodes of a built-in GPU name of several nodes:
/// what such servers usually carry. An NVLink4 server (DGX H100) has an
/// InfiniBand NDR port, 400 Gb/s, per GPU; an NVLink3 one (DGX A100) HDR,
/// 200 Gb/s per GPU; machines of PCIe cards, 10 Gb/s Ethernet that the
/// node's GPUs share (each rank's collectives cross it at once under
/// hybrid sharding, so each gets its share). CPU ranks of several "nodes" keep
/// their one link (a hardware file says otherwise with inter_node_gbs).
void setInterNodeFabric(HardwareSpec &h) {
  if (!h.isCuda()) {
    return;
  }
  if (h.link == "nvlink4") {
    h.interNodeGBs = 50, h.interNodeLatencyUs = 5;
  } else if (h.link == "nvlink3") {
    h.interNodeGBs = 25, h.interNodeLatencyUs = 5;
  } else {
    h.interNodeGBs = 1.25 / double(h.gpus), h.interNodeLatencyUs = 30;
  }
}

} // namespace

namespace detail {

HardwareSpec builtinHardware(StringRef name) { return builtin(name); }

Error fileError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

std::string YamlPlace::where(yaml::Node *node) const {
  // A node the parser gave up on (a value missing after a syntax error)
  // may be null or lie outside the text: the file alone is the place then.
  SMLoc start = node ? node->getSourceRange().Start : SMLoc();
  if (!start.isValid() || sources.FindBufferContainingLoc(start) == 0) {
    return path.str();
  }
  auto lc = sources.getLineAndColumn(start);
  return (path + ":" + Twine(lc.first) + ":" + Twine(lc.second)).str();
}

} // namespace detail

using detail::fileError;

namespace {

/// The keys that are one non-negative number each, and where they go.
struct PlainFigure {
  const char *key;
  double HardwareSpec::*field;
};

const std::vector<PlainFigure> &plainFigures() {
  static const std::vector<PlainFigure> figures = {
      {"bf16_tflops", &HardwareSpec::bf16Tflops},
      {"fp32_tflops", &HardwareSpec::fp32Tflops},
      {"bandwidth_gbs", &HardwareSpec::memoryBandwidthGBs},
      {"link_gbs", &HardwareSpec::linkGBs},
      {"link_latency_us", &HardwareSpec::linkLatencyUs},
      {"inter_node_gbs", &HardwareSpec::interNodeGBs},
      {"inter_node_latency_us", &HardwareSpec::interNodeLatencyUs},
      {"host_link_gbs", &HardwareSpec::hostLinkGBs},
      {"host_bandwidth_gbs", &HardwareSpec::hostMemoryGBs},
      {"cpu_gflops_per_thread", &HardwareSpec::cpuGflopsPerThread},
      {"cpu_parallel_half_mflop", &HardwareSpec::cpuParallelHalfMflop},
      {"cpu_pool_half_us", &HardwareSpec::cpuPoolHalfUs},
      {"launch_overhead_us", &HardwareSpec::launchOverheadUs}};
  return figures;
}

const PlainFigure *plainFigure(StringRef key) {
  for (const PlainFigure &figure : plainFigures()) {
    if (key == figure.key) {
      return &figure;
    }
  }
  return nullptr;
}

} // namespace

namespace detail {

Expected<HardwareSpec> completeHardware(HardwareSpec h, bool sawBackend,
                                        const std::set<std::string> &given,
                                        StringRef path) {
  if (!sawBackend) {
    h.backend = h.sm > 0 ? "cuda" : "cpu";
  }
  if (!h.isCuda()) {
    HardwareSpec cpu = builtin("cpu");
    for (const char *key : {"cpu_gflops_per_thread", "bandwidth_gbs",
                            "launch_overhead_us", "cpu_parallel_half_mflop"}) {
      if (!given.count(key)) {
        h.*(plainFigure(key)->field) = cpu.*(plainFigure(key)->field);
      }
    }
    if (!given.count("cpu_parallel_efficiency")) {
      h.cpuParallelEfficiency = cpu.cpuParallelEfficiency;
    }
  }
  if (h.isCuda() && h.sm == 0) {
    return fileError("hardware file '" + path +
                     "': a cuda machine needs `sm` (e.g. 90 for H100)");
  }
  if (given.count("cpu_pool_half_us") &&
      !given.count("cpu_pool_parallel_efficiency")) {
    return fileError("hardware file '" + path +
                     "': cpu_pool_half_us needs cpu_pool_parallel_efficiency "
                     "(the pool kernels' gain from each further thread)");
  }
  return h;
}

Error applyHardwareKey(HardwareSpec &h, const YamlPlace &place,
                       yaml::ScalarNode *keyNode, yaml::ScalarNode *valueNode,
                       FileKeys &keys) {
  SmallString<32> keyStorage, valueStorage;
  StringRef key = keyNode->getValue(keyStorage);
  keys.given.insert(key.str());
  StringRef value = valueNode->getValue(valueStorage).trim();
  auto bad = [&](StringRef expected) {
    return fileError(place.where(valueNode) + ": bad value for '" + key +
                     "': expected " + expected + ", got '" + value + "'");
  };
  double number = 0;
  // getAsDouble reads "inf" and "nan" too: neither is a figure.
  bool isNumber =
      !value.getAsDouble(number) && std::isfinite(number) && number >= 0;
  if (key == "name") {
    h.name = value.str();
  } else if (key == "backend") {
    if (value != "cuda" && value != "cpu") {
      return bad("cuda or cpu");
    }
    h.backend = value.str();
    keys.sawBackend = true;
  } else if (key == "sm") {
    if (value.getAsInteger(10, h.sm) || h.sm < 30 || h.sm > 200) {
      return bad("a compute capability such as 80, 89 or 90");
    }
  } else if (key == "gpus") {
    if (value.getAsInteger(10, h.gpus) || h.gpus < 1 || h.gpus > 4096) {
      return bad("a GPU count in [1, 4096]");
    }
  } else if (key == "nodes") {
    if (value.getAsInteger(10, h.nodes) || h.nodes < 1 || h.nodes > 4096) {
      return bad("a node count in [1, 4096] (or a list of nodes)");
    }
  } else if (key == "memory_gib" || key == "memory_gb") {
    if (!isNumber || number <= 0) {
      return bad("a positive number");
    }
    h.memoryBytes = static_cast<uint64_t>(
        number * static_cast<double>(key == "memory_gib" ? kGiB : kGB));
  } else if (const auto *figure = plainFigure(key)) {
    if (!isNumber) {
      return bad("a number");
    }
    h.*(figure->field) = number;
  } else if (key == "link") {
    h.link = value.str();
  } else if (key == "cpu_parallel_efficiency") {
    if (!isNumber || number > 1) {
      return bad("a fraction in [0, 1]");
    }
    h.cpuParallelEfficiency = number;
  } else if (key == "cpu_pool_parallel_efficiency") {
    if (!isNumber || number > 1) {
      return bad("a fraction in [0, 1]");
    }
    h.cpuPoolParallelEfficiency = number;
  } else if (key.starts_with("efficiency_")) {
    StringRef kind = key.drop_front(strlen("efficiency_"));
    if (!llvm::is_contained(costKernelKinds(), kind)) {
      return fileError(place.where(keyNode) + ": unknown kernel kind in '" +
                       key + "' (known: " + join(costKernelKinds(), ", ") +
                       ")");
    }
    if (!isNumber || number <= 0 || number > 1) {
      return bad("a fraction in (0, 1]");
    }
    h.efficiency[kind.str()] = number;
  } else {
    return fileError(place.where(keyNode) + ": unknown key '" + key +
                     "' (known: name, backend, sm, gpus, nodes, memory_gib, "
                     "memory_gb, bf16_tflops, fp32_tflops, "
                     "cpu_gflops_per_thread, cpu_parallel_efficiency, "
                     "cpu_parallel_half_mflop, cpu_pool_parallel_efficiency, "
                     "cpu_pool_half_us, bandwidth_gbs, launch_overhead_us, "
                     "efficiency_<kind>, "
                     "link, link_gbs, link_latency_us, inter_node_gbs, "
                     "inter_node_latency_us, host_link_gbs, "
                     "host_bandwidth_gbs; a cluster file: nodes, links)");
  }
  return Error::success();
}

} // namespace detail

namespace {

/// One hardware document, read in one pass (LLVM's YAML nodes can be
/// walked only once): the flat form (one device kind, `gpus` per node,
/// `nodes` nodes) or, when `nodes:` is a list, a cluster file.
Expected<HardwareSpec> readHardwareDocument(yaml::MappingNode *mapping,
                                            const detail::YamlPlace &place,
                                            HardwareSpec h) {
  detail::FileKeys keys;
  detail::ClusterParts cluster;
  yaml::ScalarNode *firstFigure = nullptr;
  for (yaml::KeyValueNode &entry : *mapping) {
    auto *keyNode = dyn_cast_or_null<yaml::ScalarNode>(entry.getKey());
    SmallString<16> storage;
    StringRef key = keyNode ? keyNode->getValue(storage) : "";
    auto *list = dyn_cast_or_null<yaml::SequenceNode>(entry.getValue());
    if (keyNode && list && (key == "nodes" || key == "links")) {
      if (Error error =
              key == "nodes"
                  ? detail::readClusterNodes(list, place, cluster)
                  : detail::readClusterLinks(list, place, cluster)) {
        return error;
      }
      continue;
    }
    auto *valueNode = dyn_cast_or_null<yaml::ScalarNode>(entry.getValue());
    if (!keyNode || !valueNode) {
      return fileError(place.where(entry.getKey()) +
                       ": expected `key: value` with a scalar value");
    }
    if (key != "name" && !firstFigure) {
      firstFigure = keyNode;
    }
    if (Error error =
            detail::applyHardwareKey(h, place, keyNode, valueNode, keys)) {
      return error;
    }
  }
  if (!cluster.nodes.empty() || !cluster.links.empty()) {
    if (cluster.nodes.empty()) {
      return fileError("hardware file '" + place.path +
                       "': `links:` without a `nodes:` list");
    }
    if (firstFigure) {
      SmallString<16> storage;
      return fileError(place.where(firstFigure) + ": '" +
                       firstFigure->getValue(storage) +
                       "' beside `nodes:`: a cluster file's figures go in "
                       "each device's entry under `devices:`");
    }
    return detail::assembleCluster(h.name, std::move(cluster), place);
  }
  return detail::completeHardware(std::move(h), keys.sawBackend, keys.given,
                                  place.path);
}

} // namespace

Expected<HardwareSpec> parseHardwareYaml(StringRef text, StringRef path) {
  SourceMgr sources;
  std::string diagnostics;
  raw_string_ostream diagStream(diagnostics);
  yaml::Stream stream(text, sources, /*ShowColors=*/false);
  sources.setDiagHandler(
      [](const SMDiagnostic &d, void *context) {
        d.print(nullptr, *static_cast<raw_string_ostream *>(context), false);
      },
      &diagStream);
  detail::YamlPlace place{sources, path};
  HardwareSpec h;
  h.name = sys::path::stem(path).str();
  std::optional<Expected<HardwareSpec>> result;
  for (yaml::Document &document : stream) {
    auto *mapping = dyn_cast_or_null<yaml::MappingNode>(document.getRoot());
    if (!mapping || result) {
      if (!diagnostics.empty()) {
        return fileError("hardware file '" + path + "' is not valid YAML: " +
                         StringRef(diagnostics).trim());
      }
      return fileError("hardware file '" + path +
                       "' must be one mapping of keys to values");
    }
    result = readHardwareDocument(mapping, place, h);
    if (!*result) {
      return result->takeError();
    }
  }
  if (!diagnostics.empty()) {
    return fileError("hardware file '" + path + "' is not valid YAML: " +
                     StringRef(diagnostics).trim());
  }
  if (!result) {
    return fileError("hardware file '" + path + "' is empty");
  }
  return std::move(*result);
}

namespace {

Expected<HardwareSpec> readHardwareFile(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer) {
    return fileError("cannot read hardware file '" + path +
                     "': " + buffer.getError().message());
  }
  return parseHardwareYaml((*buffer)->getBuffer(), path);
}

} // namespace

std::string cubinArchFor(int64_t sm) {
  // Hopper gets its architecture-specific target (wgmma, setmaxnreg);
  // Ampere's sm_80 cubin also runs on sm_86/87 GPUs.
  if (sm == 90) {
    return "sm_90a";
  }
  if (sm >= 80 && sm < 89) {
    return "sm_80";
  }
  return "sm_" + std::to_string(sm);
}

std::vector<std::string> knownHardwareNames() {
  return {"cpu",  "h100", "h100-pcie", "h200",    "a100-80gb", "a100-40gb",
          "l4",   "a10g", "rtx4090",   "rtx3090", "t4"};
}

const std::vector<std::string> &costKernelKinds() {
  static const std::vector<std::string> kinds = {
      "gemm", "attention", "norm", "elementwise", "loss", "optimizer", "copy",
      "host_copy", "comm", "compression", "reduce"};
  return kinds;
}

Expected<HardwareSpec> resolveHardware(StringRef spec) {
  if (sys::fs::is_regular_file(spec)) {
    return readHardwareFile(spec);
  }
  std::string lowered = spec.trim().lower();
  StringRef name = lowered;
  // Up to two leading counts: [nodes x] devices x NAME.
  SmallVector<int64_t, 2> counts;
  while (counts.size() < 2) {
    auto [prefix, rest] = name.split('x');
    int64_t count = 0;
    if (rest.empty() || prefix.getAsInteger(10, count)) {
      break;
    }
    if (count < 1 || count > 4096) {
      return fileError("hardware '" + spec + "': a count in [1, 4096] is "
                       "expected before 'x'");
    }
    counts.push_back(count);
    name = rest;
  }
  HardwareSpec h = builtin(name);
  if (h.name.empty()) {
    std::string known;
    for (const std::string &n : knownHardwareNames()) {
      known += (known.empty() ? "" : ", ") + n;
    }
    return fileError("unknown hardware '" + spec + "' (known: " + known +
                     ", optionally as NxNAME or NODESxNxNAME, or a hardware "
                     "YAML file)");
  }
  int64_t count = counts.empty() ? 1 : counts.back();
  h.nodes = counts.size() == 2 ? counts.front() : 1;
  h.gpus = count;
  h.name = lowered;
  if (h.nodes > 1) {
    setInterNodeFabric(h);
  }
  return h;
}

std::vector<std::pair<std::string, double>>
hardwareFigures(const HardwareSpec &h) {
  std::vector<std::pair<std::string, double>> figures;
  for (const PlainFigure &figure : plainFigures()) {
    figures.emplace_back(figure.key, h.*(figure.field));
  }
  figures.emplace_back("cpu_parallel_efficiency", h.cpuParallelEfficiency);
  if (h.cpuPoolParallelEfficiency) {
    figures.emplace_back("cpu_pool_parallel_efficiency",
                         *h.cpuPoolParallelEfficiency);
  }
  figures.emplace_back("sm", static_cast<double>(h.sm));
  figures.emplace_back("memory_bytes", static_cast<double>(h.memoryBytes));
  figures.emplace_back("threads", static_cast<double>(h.threads));
  figures.emplace_back("speed", h.speed);
  for (const auto &[kind, value] : h.efficiency) {
    figures.emplace_back("efficiency_" + kind, value);
  }
  return figures;
}

bool setHardwareFigure(HardwareSpec &h, StringRef key, double value) {
  // Figures come from files and plans anyone may write: every one is a
  // finite, non-negative number, and the whole ones convert exactly.
  if (!std::isfinite(value) || value < 0) {
    return false;
  }
  if ((key == "sm" && value > 10000) || (key == "threads" && value > 65536) ||
      (key == "memory_bytes" && value >= 18446744073709551616.0)) {
    return false;
  }
  if (const PlainFigure *figure = plainFigure(key)) {
    h.*(figure->field) = value;
  } else if (key == "cpu_parallel_efficiency") {
    h.cpuParallelEfficiency = value;
  } else if (key == "cpu_pool_parallel_efficiency") {
    h.cpuPoolParallelEfficiency = value;
  } else if (key == "sm") {
    h.sm = static_cast<int64_t>(value);
    h.backend = h.sm > 0 ? "cuda" : "cpu";
  } else if (key == "memory_bytes") {
    h.memoryBytes = static_cast<uint64_t>(value);
  } else if (key == "threads") {
    h.threads = static_cast<int64_t>(value);
  } else if (key == "speed") {
    h.speed = value;
  } else if (key.starts_with("efficiency_") &&
             llvm::is_contained(costKernelKinds(),
                                key.drop_front(strlen("efficiency_")))) {
    h.efficiency[key.drop_front(strlen("efficiency_")).str()] = value;
  } else {
    return false;
  }
  return true;
}

} // namespace tailor
