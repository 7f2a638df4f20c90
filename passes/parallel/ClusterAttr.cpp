//===- ClusterAttr.cpp - a cluster's ranks as a module attribute ----------===//

#include "passes/parallel/ClusterAttr.h"

#include "mlir/IR/Builders.h"

namespace tailor::parallel {

using namespace mlir;

DictionaryAttr rankDeviceAttr(Builder &builder, const HardwareSpec &device) {
  SmallVector<NamedAttribute> entries = {
      builder.getNamedAttr("device", builder.getStringAttr(device.name)),
      builder.getNamedAttr("node", builder.getI64IntegerAttr(device.node))};
  for (const auto &[key, value] : hardwareFigures(device)) {
    entries.push_back(
        builder.getNamedAttr(key, builder.getF64FloatAttr(value)));
  }
  return builder.getDictionaryAttr(entries);
}

void attachCluster(ModuleOp module, const HardwareSpec &hardware) {
  Builder builder(module.getContext());
  SmallVector<Attribute> ranks;
  for (int64_t rank = 0; rank < hardware.ranks(); ++rank) {
    ranks.push_back(rankDeviceAttr(builder, hardware.rankDevice(rank)));
  }
  module->setAttr(kClusterAttrName,
                  builder.getDictionaryAttr(
                      {builder.getNamedAttr("name",
                                            builder.getStringAttr(hardware.name)),
                       builder.getNamedAttr("ranks",
                                            builder.getArrayAttr(ranks))}));
}

/// Rank `index`'s device from its dictionary.
static FailureOr<HardwareSpec> rankFromAttr(ModuleOp module, Attribute attr,
                                            size_t index) {
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict) {
    return module.emitError() << kClusterAttrName << ": rank " << index
                              << " is not a dictionary";
  }
  HardwareSpec device;
  for (NamedAttribute entry : dict) {
    StringRef key = entry.getName().getValue();
    if (key == "device") {
      auto name = dyn_cast<StringAttr>(entry.getValue());
      device.name = name ? name.getValue().str() : "";
      continue;
    }
    if (key == "node") {
      auto node = dyn_cast<IntegerAttr>(entry.getValue());
      device.node = node ? node.getInt() : -1;
      continue;
    }
    auto number = dyn_cast<FloatAttr>(entry.getValue());
    if (!number || !setHardwareFigure(device, key, number.getValueAsDouble())) {
      return module.emitError()
             << kClusterAttrName << ": rank " << index << ": '" << key
             << "' is not a hardware figure (an f64 under a hardware file's "
                "key)";
    }
  }
  if (device.name.empty() || device.node < 0) {
    return module.emitError() << kClusterAttrName << ": rank " << index
                              << " needs `device` (a string) and `node` (an "
                                 "integer)";
  }
  return device;
}

FailureOr<std::vector<HardwareSpec>> clusterRanks(ModuleOp module) {
  auto cluster = module->getAttrOfType<DictionaryAttr>(kClusterAttrName);
  auto ranks = cluster ? cluster.getAs<ArrayAttr>("ranks") : ArrayAttr();
  if (!ranks || ranks.empty()) {
    return module.emitError()
           << "no " << kClusterAttrName
           << " = {ranks = [...]} on the module: compile with a cluster "
              "file (--hardware FILE with `nodes:`)";
  }
  std::vector<HardwareSpec> devices;
  for (auto [index, attr] : llvm::enumerate(ranks)) {
    FailureOr<HardwareSpec> device = rankFromAttr(module, attr, index);
    if (failed(device)) {
      return failure();
    }
    devices.push_back(std::move(*device));
  }
  return devices;
}

} // namespace tailor::parallel
