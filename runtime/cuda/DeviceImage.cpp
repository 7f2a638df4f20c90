//===- DeviceImage.cpp - cubin ELF and PTX readers ------------------------===//
//
// The cubin reader trusts nothing: every offset and size is checked against
// the image before it is read, so a tampered plan gets a message, not a
// crash. The SM sits in e_flags: bits 8-15 in the ELF ABI version 8 layout
// nvcc 12.8+ writes (0x5a04 for sm_90), bits 0-7 in the older layout.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceImage.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tailor::runtime::cuda {

namespace {
constexpr uint16_t kMachineCuda = 190; // EM_CUDA
constexpr uint32_t kSymbolTable = 2;   // SHT_SYMTAB
constexpr uint8_t kFunction = 2;       // STT_FUNC
constexpr uint8_t kGlobal = 1;         // STB_GLOBAL
constexpr uint8_t kCudaEntry = 0x10;   // STO_CUDA_ENTRY in st_other

template <typename T> bool readAt(const uint8_t *data, size_t size,
                                  uint64_t offset, T &value) {
  if (offset > size || sizeof(T) > size - offset) {
    return false;
  }
  std::memcpy(&value, data + offset, sizeof(T));
  return true;
}
} // namespace

std::string readCubin(const uint8_t *data, size_t size, DeviceImageInfo &info) {
  info = DeviceImageInfo();
  if (size < 64 || std::memcmp(data, "\x7f" "ELF", 4) != 0) {
    return "not an ELF file";
  }
  if (data[4] != 2 || data[5] != 1) {
    return "not a little-endian 64-bit ELF file";
  }
  uint16_t machine = 0;
  uint32_t flags = 0;
  uint64_t sectionOffset = 0;
  uint16_t sectionSize = 0, sectionCount = 0;
  readAt(data, size, 18, machine);
  readAt(data, size, 48, flags);
  readAt(data, size, 40, sectionOffset);
  readAt(data, size, 58, sectionSize);
  readAt(data, size, 60, sectionCount);
  if (machine != kMachineCuda) {
    return "an ELF file for machine " + std::to_string(machine) +
           ", not a CUDA cubin (190)";
  }
  uint8_t abiVersion = data[8];
  info.sm = static_cast<int>(abiVersion >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
  if (info.sm < 30 || info.sm > 200) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%x", flags);
    return std::string("a cubin with an unreadable SM (e_flags 0x") + hex + ")";
  }
  if (sectionSize < 64) {
    return "a cubin with section headers of " + std::to_string(sectionSize) +
           " bytes";
  }
  for (uint16_t s = 0; s < sectionCount; ++s) {
    uint64_t header = sectionOffset + uint64_t(s) * sectionSize;
    uint32_t type = 0, link = 0;
    uint64_t offset = 0, bytes = 0, entrySize = 0;
    if (!readAt(data, size, header + 4, type) ||
        !readAt(data, size, header + 24, offset) ||
        !readAt(data, size, header + 32, bytes) ||
        !readAt(data, size, header + 40, link) ||
        !readAt(data, size, header + 56, entrySize)) {
      return "section header " + std::to_string(s) + " lies outside the cubin";
    }
    if (type != kSymbolTable) {
      continue;
    }
    if (entrySize < 24 || offset > size || bytes > size - offset) {
      return "the symbol table lies outside the cubin";
    }
    uint64_t stringsHeader = sectionOffset + uint64_t(link) * sectionSize;
    uint64_t stringsOffset = 0, stringsBytes = 0;
    if (link >= sectionCount || !readAt(data, size, stringsHeader + 24, stringsOffset) ||
        !readAt(data, size, stringsHeader + 32, stringsBytes) ||
        stringsOffset > size || stringsBytes > size - stringsOffset) {
      return "the symbol names lie outside the cubin";
    }
    for (uint64_t at = offset; at + entrySize <= offset + bytes; at += entrySize) {
      uint32_t name = 0;
      uint8_t symbolInfo = 0, other = 0;
      readAt(data, size, at, name);
      readAt(data, size, at + 4, symbolInfo);
      readAt(data, size, at + 5, other);
      // Kernels are global functions marked as entries (STO_CUDA_ENTRY);
      // the weak ones are the compiler's helpers (division, pow slow paths).
      if ((symbolInfo & 0xf) != kFunction || (symbolInfo >> 4) != kGlobal ||
          !(other & kCudaEntry) || name >= stringsBytes) {
        continue;
      }
      const char *begin = reinterpret_cast<const char *>(data + stringsOffset + name);
      size_t length = strnlen(begin, stringsBytes - name);
      if (length == stringsBytes - name) {
        return "a symbol name runs past the cubin's string table";
      }
      info.functions.emplace_back(begin, length);
    }
  }
  std::sort(info.functions.begin(), info.functions.end());
  info.functions.erase(std::unique(info.functions.begin(), info.functions.end()),
                       info.functions.end());
  return "";
}

std::string readPtx(const uint8_t *data, size_t size, DeviceImageInfo &info) {
  info = DeviceImageInfo();
  std::string text(reinterpret_cast<const char *>(data), size);
  if (text.find(".version") == std::string::npos) {
    return "not PTX text (no .version directive)";
  }
  size_t target = text.find(".target sm_");
  if (target == std::string::npos) {
    return "PTX without a .target sm_XX directive";
  }
  info.sm = std::atoi(text.c_str() + target + 11);
  if (info.sm < 30 || info.sm > 200) {
    return "PTX with an unreadable .target";
  }
  for (size_t at = text.find(".entry "); at != std::string::npos;
       at = text.find(".entry ", at + 7)) {
    size_t begin = at + 7;
    size_t end = text.find_first_of("( \t\n", begin);
    if (end == std::string::npos) {
      return "a truncated .entry directive";
    }
    info.functions.push_back(text.substr(begin, end - begin));
  }
  std::sort(info.functions.begin(), info.functions.end());
  return "";
}

bool cubinRunsOn(int imageSm, bool archSpecific, int deviceSm) {
  if (archSpecific) {
    return imageSm == deviceSm;
  }
  return imageSm / 10 == deviceSm / 10 && deviceSm % 10 >= imageSm % 10;
}

int bestCubin(const std::vector<CubinCandidate> &cubins, int deviceSm) {
  int best = -1;
  for (size_t i = 0; i < cubins.size(); ++i) {
    const CubinCandidate &c = cubins[i];
    if (cubinRunsOn(c.sm, c.archSpecific, deviceSm) &&
        (best < 0 || c.sm > cubins[size_t(best)].sm)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

} // namespace tailor::runtime::cuda
