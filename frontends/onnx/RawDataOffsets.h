//===- RawDataOffsets.h - where initializer bytes sit in a model -*- C++ -*-===//
//
// Parsing a ModelProto copies every raw_data field, so the importer cannot
// tell where an initializer's bytes are in the file. Plans reference weights
// by (file, offset, length) and never carry them, so this scans the protobuf
// wire format of the top-level graph's initializers for the byte range of
// each raw_data field.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_FRONTENDS_ONNX_RAWDATAOFFSETS_H
#define TAILOR_FRONTENDS_ONNX_RAWDATAOFFSETS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <utility>

namespace tailor::onnx_import {

/// Initializer name -> (offset, length) of its raw_data within `model`, the
/// bytes of a binary ModelProto. Initializers without raw_data are absent; a
/// malformed message yields what was found before the damage.
llvm::StringMap<std::pair<uint64_t, uint64_t>>
findRawDataOffsets(llvm::StringRef model);

} // namespace tailor::onnx_import

#endif // TAILOR_FRONTENDS_ONNX_RAWDATAOFFSETS_H
