//===- Hardware.cpp - built-in hardware table and hardware files ----------===//

#include "compiler/Hardware.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <set>

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

Error fileError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// The keys that are one non-negative number each, and where they go.
struct PlainFigure {
  const char *key;
  double HardwareSpec::*field;
};

const PlainFigure *plainFigure(StringRef key) {
  static const PlainFigure figures[] = {
      {"bf16_tflops", &HardwareSpec::bf16Tflops},
      {"fp32_tflops", &HardwareSpec::fp32Tflops},
      {"bandwidth_gbs", &HardwareSpec::memoryBandwidthGBs},
      {"link_gbs", &HardwareSpec::linkGBs},
      {"link_latency_us", &HardwareSpec::linkLatencyUs},
      {"host_link_gbs", &HardwareSpec::hostLinkGBs},
      {"host_bandwidth_gbs", &HardwareSpec::hostMemoryGBs},
      {"cpu_gflops_per_thread", &HardwareSpec::cpuGflopsPerThread},
      {"launch_overhead_us", &HardwareSpec::launchOverheadUs}};
  for (const PlainFigure &figure : figures) {
    if (key == figure.key) {
      return &figure;
    }
  }
  return nullptr;
}

/// What a file leaves unsaid: the backend (cuda when it names an SM), and
/// on the CPU the built-in figures it does not set; a cuda file needs `sm`.
Expected<HardwareSpec> completeHardware(HardwareSpec h, bool sawBackend,
                                        const std::set<std::string> &given,
                                        StringRef path) {
  if (!sawBackend) {
    h.backend = h.sm > 0 ? "cuda" : "cpu";
  }
  if (!h.isCuda()) {
    HardwareSpec cpu = builtin("cpu");
    for (const char *key : {"cpu_gflops_per_thread", "bandwidth_gbs",
                            "launch_overhead_us"}) {
      if (!given.count(key)) {
        h.*(plainFigure(key)->field) = cpu.*(plainFigure(key)->field);
      }
    }
  }
  if (h.isCuda() && h.sm == 0) {
    return fileError("hardware file '" + path +
                     "': a cuda machine needs `sm` (e.g. 90 for H100)");
  }
  return h;
}

Expected<HardwareSpec> readHardwareFile(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer) {
    return fileError("cannot read hardware file '" + path +
                     "': " + buffer.getError().message());
  }
  SourceMgr sources;
  std::string diagnostics;
  raw_string_ostream diagStream(diagnostics);
  yaml::Stream stream((*buffer)->getMemBufferRef(), sources,
                      /*ShowColors=*/false);
  sources.setDiagHandler(
      [](const SMDiagnostic &d, void *context) {
        d.print(nullptr, *static_cast<raw_string_ostream *>(context), false);
      },
      &diagStream);
  auto where = [&](yaml::Node *node) {
    auto lc = sources.getLineAndColumn(node->getSourceRange().Start);
    return (path + ":" + Twine(lc.first) + ":" + Twine(lc.second)).str();
  };
  HardwareSpec h;
  h.name = sys::path::stem(path).str();
  bool sawBackend = false;
  std::set<std::string> given;
  for (yaml::Document &document : stream) {
    auto *mapping = dyn_cast_or_null<yaml::MappingNode>(document.getRoot());
    if (!mapping) {
      if (!diagnostics.empty()) {
        return fileError("hardware file '" + path + "' is not valid YAML: " +
                         StringRef(diagnostics).trim());
      }
      return fileError("hardware file '" + path +
                       "' must be a mapping of keys to values");
    }
    for (yaml::KeyValueNode &entry : *mapping) {
      auto *keyNode = dyn_cast_or_null<yaml::ScalarNode>(entry.getKey());
      auto *valueNode = dyn_cast_or_null<yaml::ScalarNode>(entry.getValue());
      if (!keyNode || !valueNode) {
        return fileError(where(entry.getKey()) +
                         ": expected `key: value` with a scalar value");
      }
      SmallString<32> keyStorage, valueStorage;
      StringRef key = keyNode->getValue(keyStorage);
      given.insert(key.str());
      StringRef value = valueNode->getValue(valueStorage).trim();
      auto bad = [&](StringRef expected) {
        return fileError(where(valueNode) + ": bad value for '" + key +
                         "': expected " + expected + ", got '" + value + "'");
      };
      double number = 0;
      bool isNumber = !value.getAsDouble(number) && number >= 0;
      if (key == "name") {
        h.name = value.str();
      } else if (key == "backend") {
        if (value != "cuda" && value != "cpu") {
          return bad("cuda or cpu");
        }
        h.backend = value.str();
        sawBackend = true;
      } else if (key == "sm") {
        if (value.getAsInteger(10, h.sm) || h.sm < 30 || h.sm > 200) {
          return bad("a compute capability such as 80, 89 or 90");
        }
      } else if (key == "gpus") {
        if (value.getAsInteger(10, h.gpus) || h.gpus < 1 || h.gpus > 4096) {
          return bad("a GPU count in [1, 4096]");
        }
      } else if (key == "nodes") {
        if (value.getAsInteger(10, h.nodes) || h.nodes < 1 ||
            h.nodes > 4096) {
          return bad("a node count in [1, 4096]");
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
      } else if (key.starts_with("efficiency_")) {
        StringRef kind = key.drop_front(strlen("efficiency_"));
        if (!llvm::is_contained(costKernelKinds(), kind)) {
          return fileError(where(keyNode) + ": unknown kernel kind in '" +
                           key + "' (known: " +
                           join(costKernelKinds(), ", ") + ")");
        }
        if (!isNumber || number <= 0 || number > 1) {
          return bad("a fraction in (0, 1]");
        }
        h.efficiency[kind.str()] = number;
      } else {
        return fileError(where(keyNode) + ": unknown key '" + key +
                         "' (known: name, backend, sm, gpus, nodes, memory_gib, "
                         "memory_gb, bf16_tflops, fp32_tflops, "
                         "cpu_gflops_per_thread, cpu_parallel_efficiency, "
                         "bandwidth_gbs, "
                         "launch_overhead_us, efficiency_<kind>, link, "
                         "link_gbs, link_latency_us, host_link_gbs)");
      }
    }
  }
  if (!diagnostics.empty()) {
    return fileError("hardware file '" + path + "' is not valid YAML: " +
                     StringRef(diagnostics).trim());
  }
  return completeHardware(std::move(h), sawBackend, given, path);
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
      "host_copy"};
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
  return h;
}

} // namespace tailor
