//===- HardwareFile.h - reading hardware and cluster files ------*- C++ -*-===//
//
// What Hardware.cpp (the flat form: one device kind) and ClusterFile.cpp
// (`nodes:`, mixed devices) share while reading a hardware YAML file: the
// place of a node for errors, the keys one device takes, and the defaults
// a file leaves to the built-in table.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_COMPILER_HARDWAREFILE_H
#define TAILOR_COMPILER_HARDWAREFILE_H

#include "compiler/Hardware.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <set>
#include <utility>
#include <vector>

namespace tailor::detail {

/// The file being read, to name `path:line:column` in errors.
struct YamlPlace {
  llvm::SourceMgr &sources;
  llvm::StringRef path;
  std::string where(llvm::yaml::Node *node) const;
};

/// What the keys of one device said so far.
struct FileKeys {
  bool sawBackend = false;
  std::set<std::string> given;
};

llvm::Error fileError(const llvm::Twine &message);

/// The built-in device `name` (an empty name when unknown).
HardwareSpec builtinHardware(llvm::StringRef name);

/// Applies one `key: value` of a device (sm, memory_gib, bf16_tflops, ...)
/// to `h`; errors name the place and the key.
llvm::Error applyHardwareKey(HardwareSpec &h, const YamlPlace &place,
                             llvm::yaml::ScalarNode *key,
                             llvm::yaml::ScalarNode *value, FileKeys &keys);

/// The backend a device's keys imply, and on the CPU the built-in figures
/// they leave unset; a cuda device needs `sm`.
llvm::Expected<HardwareSpec> completeHardware(HardwareSpec h, bool sawBackend,
                                              const std::set<std::string> &given,
                                              llvm::StringRef path);

/// What a cluster file's `nodes:` and `links:` say, read in file order
/// (LLVM's YAML nodes can be walked only once).
struct ClusterParts {
  struct Node {
    std::string name;
    std::vector<HardwareSpec> devices;
    llvm::yaml::Node *where = nullptr;
  };
  std::vector<Node> nodes;
  std::vector<std::pair<ClusterLink, llvm::yaml::Node *>> links;
  llvm::yaml::Node *nodesWhere = nullptr;
};

/// Reads `nodes:` (each with `devices:`) into `parts`.
llvm::Error readClusterNodes(llvm::yaml::SequenceNode *list,
                             const YamlPlace &place, ClusterParts &parts);

/// Reads `links:` into `parts` (their node names are checked by
/// assembleCluster, as `links:` may come first).
llvm::Error readClusterLinks(llvm::yaml::SequenceNode *list,
                             const YamlPlace &place, ClusterParts &parts);

/// The cluster as one spec: its ranks' devices, and for the plan as a
/// whole rank 0's kind with the smallest memory, the lowest SM and the
/// slowest link any collective's ring crosses.
llvm::Expected<HardwareSpec> assembleCluster(llvm::StringRef name,
                                             ClusterParts parts,
                                             const YamlPlace &place);

} // namespace tailor::detail

#endif // TAILOR_COMPILER_HARDWAREFILE_H
