//===- ClusterFile.cpp - hardware files with mixed devices ----------------===//
//
// A cluster file lists its nodes, each with its devices, and the links
// between nodes:
//
//   name: lab
//   nodes:
//     - name: box0
//       devices:
//         - {kind: rtx4090, count: 2}
//         - {kind: cpu, count: 1, threads: 4, speed: 0.5}
//     - name: box1
//       devices:
//         - {sm: 86, memory_gib: 24, bf16_tflops: 71, count: 1}
//   links:
//     - {nodes: [box0, box1], kind: 10gbe, gbs: 1.25, latency_us: 30}
//
// A device is a built-in kind or inline figures (the keys of a flat
// hardware file), `count` ranks of it, and on the CPU its `threads` and a
// relative `speed` that scales its rates (a rank sharing its core with
// another runs at about 0.5). Ranks are numbered node by node, device by
// device, in file order.
//
//===----------------------------------------------------------------------===//

#include "compiler/HardwareFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace tailor::detail {

namespace {

using Node = ClusterParts::Node;

/// The text of a scalar value, or an error naming `key`'s place.
Expected<std::string> scalarValue(const YamlPlace &place, yaml::Node *node,
                                  StringRef key) {
  auto *scalar = dyn_cast_or_null<yaml::ScalarNode>(node);
  if (!scalar) {
    return fileError(place.where(node) + ": '" + key +
                     "' expects a single value");
  }
  SmallString<32> storage;
  return scalar->getValue(storage).trim().str();
}

/// A positive number (integral when `integral`) for `key`.
Expected<double> positiveValue(const YamlPlace &place, yaml::Node *node,
                               StringRef key, bool integral) {
  Expected<std::string> text = scalarValue(place, node, key);
  if (!text) {
    return text.takeError();
  }
  double number = 0;
  // Whole numbers up to 2^53 (a double holds each exactly; larger ones and
  // infinities would not convert to an integer).
  if (StringRef(*text).getAsDouble(number) || !std::isfinite(number) ||
      number <= 0 ||
      (integral && (number > 9007199254740992.0 ||
                    number != std::floor(number)))) {
    return fileError(place.where(node) + ": bad value for '" + key +
                     "': expected a positive " +
                     (integral ? "whole number" : "number") + ", got '" +
                     *text + "'");
  }
  return number;
}

/// Scales a device's rates by its relative speed (its launches' fixed cost
/// grows alike).
void applySpeed(HardwareSpec &h, double speed) {
  h.speed = speed;
  for (double *rate : {&h.bf16Tflops, &h.fp32Tflops, &h.memoryBandwidthGBs,
                       &h.hostMemoryGBs, &h.cpuGflopsPerThread}) {
    *rate *= speed;
  }
  h.launchOverheadUs /= speed;
}

/// The keys a cluster's device takes beside a flat file's.
struct DeviceKeys {
  std::string kind;
  int64_t count = 1;
  int64_t threads = 0;
  double speed = 1;
};

/// A device's `key: value` pairs, read once (LLVM's YAML nodes can be
/// walked only once; scalars stay readable).
using ScalarPairs = std::vector<std::pair<yaml::ScalarNode *, yaml::ScalarNode *>>;

Expected<ScalarPairs> scalarPairs(yaml::MappingNode *mapping,
                                  const YamlPlace &place) {
  ScalarPairs pairs;
  for (yaml::KeyValueNode &entry : *mapping) {
    auto *key = dyn_cast_or_null<yaml::ScalarNode>(entry.getKey());
    auto *value = dyn_cast_or_null<yaml::ScalarNode>(entry.getValue());
    if (!key || !value) {
      return fileError(place.where(entry.getKey()) +
                       ": expected `key: value` with a single value");
    }
    pairs.push_back({key, value});
  }
  return pairs;
}

/// Reads `kind`, `count`, `threads` and `speed` of a device entry.
Expected<DeviceKeys> readDeviceKeys(const ScalarPairs &pairs,
                                    const YamlPlace &place) {
  DeviceKeys keys;
  for (auto [keyNode, valueNode] : pairs) {
    SmallString<16> storage;
    std::string key = keyNode->getValue(storage).str();
    if (key == "kind") {
      Expected<std::string> kind = scalarValue(place, valueNode, key);
      if (!kind) {
        return kind.takeError();
      }
      keys.kind = StringRef(*kind).lower();
      if (builtinHardware(keys.kind).name.empty()) {
        return fileError(place.where(valueNode) + ": unknown device kind '" +
                         *kind + "' (known: " +
                         join(knownHardwareNames(), ", ") +
                         "; or give its figures instead of a kind)");
      }
    } else if (key == "count" || key == "threads" || key == "speed") {
      Expected<double> number =
          positiveValue(place, valueNode, key, key != "speed");
      if (!number) {
        return number.takeError();
      }
      // A rank is a process: no cluster file describes more than a runtime
      // runs (65536), and a count past it would only allocate.
      if (key != "speed" && *number > 65536) {
        return fileError(place.where(valueNode) + ": '" + key + "' " +
                         Twine(int64_t(*number)) + " is more than 65536");
      }
      if (key == "count") {
        keys.count = static_cast<int64_t>(*number);
      } else if (key == "threads") {
        keys.threads = static_cast<int64_t>(*number);
      } else {
        keys.speed = *number;
      }
    }
  }
  return keys;
}

/// One device entry: `count` ranks of one device.
Expected<std::vector<HardwareSpec>> readDevice(yaml::Node *node,
                                               const YamlPlace &place) {
  auto *mapping = dyn_cast_or_null<yaml::MappingNode>(node);
  if (!mapping) {
    return fileError(place.where(node) + ": a device is a mapping (kind or "
                     "figures, count, threads, speed)");
  }
  Expected<ScalarPairs> pairs = scalarPairs(mapping, place);
  if (!pairs) {
    return pairs.takeError();
  }
  Expected<DeviceKeys> keys = readDeviceKeys(*pairs, place);
  if (!keys) {
    return keys.takeError();
  }
  HardwareSpec h;
  if (!keys->kind.empty()) {
    h = builtinHardware(keys->kind);
  }
  FileKeys given;
  for (auto [key, value] : *pairs) {
    SmallString<16> storage;
    StringRef name = key->getValue(storage);
    if (name == "kind" || name == "count" || name == "threads" ||
        name == "speed") {
      continue;
    }
    if (name == "gpus" || name == "nodes") {
      return fileError(place.where(key) + ": '" + name +
                       "' is not a device's key in a cluster file (use "
                       "`count`, and one entry per node under `nodes:`)");
    }
    if (Error error = applyHardwareKey(h, place, key, value, given)) {
      return error;
    }
  }
  if (keys->kind.empty()) {
    Expected<HardwareSpec> complete =
        completeHardware(h, given.sawBackend, given.given, place.path);
    if (!complete) {
      return complete.takeError();
    }
    h = std::move(*complete);
    if (h.name.empty()) {
      h.name = h.isCuda() ? "gpu" : "cpu";
    }
  }
  h.threads = keys->threads;
  applySpeed(h, keys->speed);
  return std::vector<HardwareSpec>(static_cast<size_t>(keys->count), h);
}

/// One entry of `nodes:`: its name and devices.
Expected<Node> readNode(yaml::Node *node, const YamlPlace &place,
                        size_t index) {
  auto *mapping = dyn_cast_or_null<yaml::MappingNode>(node);
  if (!mapping) {
    return fileError(place.where(node) +
                     ": a node is a mapping with `name` and `devices`");
  }
  Node result;
  result.name = "node" + std::to_string(index);
  result.where = node;
  for (yaml::KeyValueNode &entry : *mapping) {
    Expected<std::string> key = scalarValue(place, entry.getKey(), "key");
    if (!key) {
      return key.takeError();
    }
    if (*key == "name") {
      Expected<std::string> name = scalarValue(place, entry.getValue(), *key);
      if (!name) {
        return name.takeError();
      }
      result.name = *name;
    } else if (*key == "devices") {
      auto *list = dyn_cast_or_null<yaml::SequenceNode>(entry.getValue());
      if (!list) {
        return fileError(place.where(entry.getValue()) +
                         ": 'devices' expects a list of devices");
      }
      for (yaml::Node &device : *list) {
        Expected<std::vector<HardwareSpec>> ranks = readDevice(&device, place);
        if (!ranks) {
          return ranks.takeError();
        }
        llvm::append_range(result.devices, *ranks);
        if (result.devices.size() > 65536) {
          return fileError(place.where(&device) +
                           ": the node has more than 65536 ranks");
        }
      }
    } else {
      return fileError(place.where(entry.getKey()) + ": unknown key '" +
                       *key + "' of a node (known: name, devices)");
    }
  }
  if (result.devices.empty()) {
    return fileError(place.where(node) + ": node '" + result.name +
                     "' lists no `devices`");
  }
  return result;
}

/// One entry of `links:`: `nodes: [a, b]`, `kind`, `gbs`, `latency_us`.
Expected<ClusterLink> readLink(yaml::Node *node, const YamlPlace &place) {
  auto *mapping = dyn_cast_or_null<yaml::MappingNode>(node);
  if (!mapping) {
    return fileError(place.where(node) + ": a link is a mapping (nodes, "
                     "kind, gbs, latency_us)");
  }
  ClusterLink link;
  for (yaml::KeyValueNode &entry : *mapping) {
    Expected<std::string> key = scalarValue(place, entry.getKey(), "key");
    if (!key) {
      return key.takeError();
    }
    if (*key == "nodes") {
      auto *pair = dyn_cast_or_null<yaml::SequenceNode>(entry.getValue());
      if (!pair) {
        return fileError(place.where(entry.getValue()) +
                         ": 'nodes' of a link expects two node names, [a, b]");
      }
      std::vector<std::string> names;
      for (yaml::Node &name : *pair) {
        Expected<std::string> text = scalarValue(place, &name, *key);
        if (!text) {
          return text.takeError();
        }
        names.push_back(*text);
      }
      if (names.size() != 2 || names[0] == names[1]) {
        return fileError(place.where(entry.getValue()) +
                         ": 'nodes' of a link expects two different node "
                         "names, [a, b]");
      }
      link.from = names[0];
      link.to = names[1];
    } else if (*key == "kind") {
      Expected<std::string> kind = scalarValue(place, entry.getValue(), *key);
      if (!kind) {
        return kind.takeError();
      }
      link.kind = *kind;
    } else if (*key == "gbs" || *key == "latency_us") {
      Expected<double> number =
          positiveValue(place, entry.getValue(), *key, false);
      if (!number) {
        return number.takeError();
      }
      (*key == "gbs" ? link.gbs : link.latencyUs) = *number;
    } else {
      return fileError(place.where(entry.getKey()) + ": unknown key '" +
                       *key + "' of a link (known: nodes, kind, gbs, "
                       "latency_us)");
    }
  }
  if (link.from.empty() || link.gbs <= 0) {
    return fileError(place.where(node) +
                     ": a link needs `nodes: [a, b]` and `gbs`");
  }
  return link;
}

} // namespace

Error readClusterNodes(yaml::SequenceNode *list, const YamlPlace &place,
                       ClusterParts &parts) {
  parts.nodesWhere = list;
  size_t ranks = 0;
  for (yaml::Node &node : *list) {
    Expected<Node> read = readNode(&node, place, parts.nodes.size());
    if (!read) {
      return read.takeError();
    }
    ranks += read->devices.size();
    if (ranks > 65536) {
      return fileError(place.where(&node) +
                       ": the cluster has more than 65536 ranks");
    }
    for (const Node &other : parts.nodes) {
      if (other.name == read->name) {
        return fileError(place.where(&node) + ": node name '" + read->name +
                         "' is used twice");
      }
    }
    parts.nodes.push_back(std::move(*read));
  }
  if (parts.nodes.empty()) {
    return fileError(place.where(list) + ": 'nodes' lists no node");
  }
  return Error::success();
}

Error readClusterLinks(yaml::SequenceNode *list, const YamlPlace &place,
                       ClusterParts &parts) {
  for (yaml::Node &node : *list) {
    Expected<ClusterLink> link = readLink(&node, place);
    if (!link) {
      return link.takeError();
    }
    parts.links.push_back({std::move(*link), &node});
  }
  return Error::success();
}

namespace {

/// Every link joins known nodes, and with several nodes every node has one.
Error checkLinks(const ClusterParts &parts, const YamlPlace &place) {
  auto known = [&](const std::string &name) {
    return llvm::any_of(parts.nodes,
                        [&](const Node &n) { return n.name == name; });
  };
  for (const auto &[link, where] : parts.links) {
    for (const std::string &end : {link.from, link.to}) {
      if (!known(end)) {
        return fileError(place.where(where) + ": link to unknown node '" +
                         end + "'");
      }
    }
  }
  for (const Node &node : parts.nodes) {
    bool linked = llvm::any_of(parts.links, [&](const auto &l) {
      return l.first.from == node.name || l.first.to == node.name;
    });
    if (parts.nodes.size() > 1 && !linked) {
      return fileError(place.where(node.where) + ": node '" + node.name +
                       "' has no link to the others (add it under `links:`)");
    }
  }
  return Error::success();
}

} // namespace

Expected<HardwareSpec> assembleCluster(StringRef name, ClusterParts parts,
                                       const YamlPlace &place) {
  if (Error error = checkLinks(parts, place)) {
    return error;
  }
  std::vector<Node> &nodes = parts.nodes;
  HardwareSpec cluster = nodes.front().devices.front();
  double slowest = 0, latency = 0;
  auto slower = [&](double gbs, double us) {
    slowest = slowest == 0 ? gbs : std::min(slowest, gbs);
    latency = std::max(latency, us);
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (HardwareSpec &device : nodes[n].devices) {
      if (device.backend != cluster.backend) {
        return fileError(place.where(nodes[n].where) + ": node '" +
                         nodes[n].name + "' has a " + device.backend +
                         " device beside " + cluster.backend +
                         " ones: one plan runs on one backend");
      }
      device.node = static_cast<int64_t>(n);
      device.nodeName = nodes[n].name;
      if (nodes[n].devices.size() > 1) {
        slower(device.linkGBs, device.linkLatencyUs);
      }
      cluster.memoryBytes = std::min(cluster.memoryBytes, device.memoryBytes);
      cluster.sm = std::min(cluster.sm, device.sm);
      cluster.rankDevices.push_back(device);
    }
  }
  for (const auto &[link, where] : parts.links) {
    slower(link.gbs, link.latencyUs);
    cluster.links.push_back(link);
  }
  // Every collective is as fast as its ring's slowest hop.
  if (slowest > 0) {
    cluster.linkGBs = slowest, cluster.linkLatencyUs = latency;
  }
  for (HardwareSpec &device : cluster.rankDevices) {
    device.nodeLinkGBs = device.linkGBs;
    device.nodeLinkLatencyUs = device.linkLatencyUs;
    device.linkGBs = cluster.linkGBs;
    device.linkLatencyUs = cluster.linkLatencyUs;
  }
  cluster.name = name.str();
  cluster.threads = 0;
  cluster.speed = 1;
  bool even = llvm::all_of(nodes, [&](const Node &n) {
    return n.devices.size() == nodes.front().devices.size();
  });
  cluster.nodes = even ? static_cast<int64_t>(nodes.size()) : 1;
  cluster.gpus = even ? static_cast<int64_t>(nodes.front().devices.size())
                      : cluster.ranks();
  return cluster;
}

} // namespace tailor::detail
