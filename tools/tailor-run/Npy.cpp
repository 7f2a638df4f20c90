//===- Npy.cpp - NumPy .npy files: read, write, convert -------------------===//

#include "tools/tailor-run/Npy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// Elements are stored little-endian and read with memcpy.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Npy.cpp assumes a little-endian host"
#endif

namespace tailor {

namespace {

struct DTypeEntry {
  NpyDType dtype;
  const char *descr;
  const char *name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {NpyDType::F32, "<f4", "float32", 4}, {NpyDType::F64, "<f8", "float64", 8},
    {NpyDType::F16, "<f2", "float16", 2}, {NpyDType::I64, "<i8", "int64", 8},
    {NpyDType::I32, "<i4", "int32", 4},   {NpyDType::I16, "<i2", "int16", 2},
    {NpyDType::I8, "|i1", "int8", 1},     {NpyDType::U8, "|u1", "uint8", 1},
    {NpyDType::Bool, "|b1", "bool", 1},
};

const DTypeEntry &entry(NpyDType dtype) {
  return kDTypes[static_cast<int>(dtype)];
}

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

/// Parses the Python dict literal NumPy writes as the header. It accepts
/// exactly what literal_eval would for the three keys, nothing more.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  bool parse(NpyArray &array, std::string &error) {
    bool sawDescr = false, sawOrder = false, sawShape = false;
    std::string descr;
    skipSpace();
    if (!consume('{')) {
      return fail("the header is not a dict", error);
    }
    while (true) {
      skipSpace();
      if (consume('}')) {
        break;
      }
      std::string key;
      if (!parseString(key)) {
        return fail("expected a quoted key", error);
      }
      skipSpace();
      if (!consume(':')) {
        return fail("expected ':' after key '" + key + "'", error);
      }
      skipSpace();
      bool *seen = key == "descr"           ? &sawDescr
                   : key == "fortran_order" ? &sawOrder
                   : key == "shape"         ? &sawShape
                                            : nullptr;
      if (!seen) {
        return reject("unexpected header key '" + key +
                          "' (a header has exactly "
                          "'descr', 'fortran_order' and 'shape')",
                      error);
      }
      if (*seen) {
        return reject("duplicate header key '" + key + "'", error);
      }
      *seen = true;
      if (key == "descr") {
        if (pos < text.size() && (text[pos] == '[' || text[pos] == '{')) {
          return reject("structured dtypes are not supported", error);
        }
        if (!parseString(descr)) {
          return fail("'descr' must be a quoted dtype string", error);
        }
      } else if (key == "fortran_order") {
        bool fortran = false;
        if (!parseBool(fortran)) {
          return fail("'fortran_order' must be True or False", error);
        }
        if (fortran) {
          return reject("fortran_order is True: column-major arrays are not "
                        "supported (save np.ascontiguousarray(a))",
                        error);
        }
      } else if (!parseShape(array.shape, error)) {
        return false;
      }
      skipSpace();
      if (consume('}')) {
        break;
      }
      if (!consume(',')) {
        return fail("expected ',' or '}' after the value of '" + key + "'",
                    error);
      }
    }
    skipSpace();
    if (pos != text.size()) {
      return fail("unexpected text after the header dict", error);
    }
    if (!sawDescr || !sawOrder || !sawShape) {
      error = std::string("the header has no '") +
              (!sawDescr   ? "descr"
               : !sawOrder ? "fortran_order"
                           : "shape") +
              "' key";
      return false;
    }
    return parseDescr(descr, array.dtype, error);
  }

private:
  // A syntax error: says where.
  bool fail(const std::string &message, std::string &error) {
    error =
        "malformed header at offset " + std::to_string(pos) + ": " + message;
    return false;
  }
  // Well-formed, but not something we accept.
  static bool reject(const std::string &message, std::string &error) {
    error = message;
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && std::strchr(" \t\r\n", text[pos])) {
      ++pos;
    }
  }
  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool consumeWord(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0) {
      return false;
    }
    pos += n;
    return true;
  }
  // A '...' or "..." literal without escapes (no key or dtype needs one).
  bool parseString(std::string &out) {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) {
      return false;
    }
    char quote = text[pos];
    size_t end = text.find(quote, pos + 1);
    if (end == std::string::npos) {
      return false;
    }
    out = text.substr(pos + 1, end - pos - 1);
    if (out.find('\\') != std::string::npos) {
      return false;
    }
    pos = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    if (consumeWord("True")) {
      out = true;
    } else if (consumeWord("False")) {
      out = false;
    } else {
      return false;
    }
    return true;
  }
  // A tuple of non-negative ints: (), (3,), (2, 3) or (2, 3,). The 'L'
  // suffix of files written by Python 2 is accepted.
  bool parseShape(std::vector<int64_t> &shape, std::string &error) {
    if (!consume('(')) {
      return fail("'shape' must be a tuple", error);
    }
    shape.clear();
    bool trailingComma = false;
    while (true) {
      skipSpace();
      if (consume(')')) {
        break;
      }
      if (pos < text.size() && text[pos] == '-') {
        return reject("negative dimension in 'shape'", error);
      }
      if (pos >= text.size() ||
          !std::isdigit(static_cast<uint8_t>(text[pos]))) {
        return fail("'shape' must hold non-negative integers", error);
      }
      int64_t dim = 0;
      while (pos < text.size() &&
             std::isdigit(static_cast<uint8_t>(text[pos]))) {
        int digit = text[pos++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return reject("dimension too large in 'shape'", error);
        }
        dim = dim * 10 + digit;
      }
      consume('L');
      shape.push_back(dim);
      if (shape.size() > size_t(kNpyMaxRank)) {
        return reject("'shape' has more than " + std::to_string(kNpyMaxRank) +
                          " dimensions",
                      error);
      }
      skipSpace();
      trailingComma = consume(',');
      if (!trailingComma) {
        skipSpace();
        if (!consume(')')) {
          return fail("expected ',' or ')' in 'shape'", error);
        }
        break;
      }
    }
    // (3) is an int in Python, not a tuple.
    if (shape.size() == 1 && !trailingComma) {
      return fail("'shape' must be a tuple (write (n,) for one dimension)",
                  error);
    }
    return true;
  }
  static bool parseDescr(const std::string &descr, NpyDType &dtype,
                         std::string &error) {
    for (const DTypeEntry &e : kDTypes) {
      // One-byte types have no byte order: NumPy writes '|' and reads any.
      bool oneByte = e.size == 1 && descr.size() == 3 &&
                     std::strchr("|<>=", descr[0]) &&
                     descr.compare(1, 2, e.descr + 1) == 0;
      // '=' is the host's order, little-endian here.
      bool native = descr.size() == 3 && descr[0] == '=' &&
                    descr.compare(1, 2, e.descr + 1) == 0;
      if (descr == e.descr || oneByte || native) {
        dtype = e.dtype;
        return true;
      }
    }
    if (!descr.empty() && descr[0] == '>') {
      error = "big-endian dtype '" + descr + "' is not supported (save " +
              "a.astype(a.dtype.newbyteorder('<')))";
      return false;
    }
    error = "unsupported dtype '" + descr + "' (supported:";
    for (const DTypeEntry &e : kDTypes) {
      error += std::string(" ") + e.descr;
    }
    error += ")";
    return false;
  }

  const std::string &text;
  size_t pos = 0;
};

bool writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace

const char *npyDescr(NpyDType dtype) { return entry(dtype).descr; }
const char *npyDTypeName(NpyDType dtype) { return entry(dtype).name; }
size_t npyDTypeSize(NpyDType dtype) { return entry(dtype).size; }

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t dim : shape) {
    n *= dim;
  }
  return n;
}

NpyArray NpyArray::zeros(NpyDType dtype, std::vector<int64_t> shape) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.assign(array.numElements() * npyDTypeSize(dtype), 0);
  return array;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

bool parseNpy(const uint8_t *bytes, size_t size, const std::string &name,
              NpyArray &array, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = name + ": " + message;
    return false;
  };
  if (size >= 4 && std::memcmp(bytes, "PK\x03\x04", 4) == 0) {
    return fail("a .npz archive, not a .npy file (extract its arrays with "
                "np.load and np.save)");
  }
  if (size < kMagicSize || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return fail("not a .npy file (no \\x93NUMPY magic string)");
  }
  if (size < kMagicSize + 2) {
    return fail("truncated header (no version)");
  }
  int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return fail("unsupported .npy version " + std::to_string(major) + "." +
                std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)");
  }
  // Version 1.0 has a 2-byte header length, later versions 4 bytes.
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = kMagicSize + 2 + lengthBytes;
  if (size < headerStart) {
    return fail("truncated header (no header length)");
  }
  uint64_t headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i) {
    headerLength |= uint64_t(bytes[kMagicSize + 2 + i]) << (8 * i);
  }
  if (headerLength > size - headerStart) {
    return fail("truncated header (header length " +
                std::to_string(headerLength) + " runs past the end of the " +
                std::to_string(size) + "-byte file)");
  }
  std::string header(reinterpret_cast<const char *>(bytes) + headerStart,
                     headerLength);
  NpyArray parsed;
  std::string headerError;
  if (!HeaderParser(header).parse(parsed, headerError)) {
    return fail(headerError);
  }
  // The element count and byte size must not overflow before comparing them
  // with what the file holds.
  uint64_t count = 1;
  for (int64_t dim : parsed.shape) {
    if (__builtin_mul_overflow(count, uint64_t(dim), &count)) {
      return fail("shape " + formatShape(parsed.shape) + " is too large");
    }
  }
  uint64_t dataBytes = 0;
  if (__builtin_mul_overflow(count, npyDTypeSize(parsed.dtype), &dataBytes) ||
      count > uint64_t(std::numeric_limits<int64_t>::max())) {
    return fail("shape " + formatShape(parsed.shape) + " is too large");
  }
  size_t available = size - headerStart - headerLength;
  if (available != dataBytes) {
    return fail(std::string(available < dataBytes ? "truncated data"
                                                  : "trailing bytes") +
                ": shape " + formatShape(parsed.shape) + " of " +
                npyDTypeName(parsed.dtype) + " needs " +
                std::to_string(dataBytes) + " bytes of data, the file has " +
                std::to_string(available));
  }
  const uint8_t *data = bytes + headerStart + headerLength;
  parsed.data.assign(data, data + dataBytes);
  array = std::move(parsed);
  return true;
}

bool readNpy(const std::string &path, NpyArray &array, std::string &error) {
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::vector<uint8_t> bytes;
  struct stat st;
  if (::fstat(fileno(file), &st) == 0 && S_ISREG(st.st_mode)) {
    bytes.reserve(static_cast<size_t>(st.st_size));
  }
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  int readError = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (readError) {
    error = path + ": cannot read: " + std::strerror(readError);
    return false;
  }
  return parseNpy(bytes.data(), bytes.size(), path, array, error);
}

std::vector<uint8_t> serializeNpy(const NpyArray &array) {
  std::string header = std::string("{'descr': '") + npyDescr(array.dtype) +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    header += (i ? ", " : "") + std::to_string(array.shape[i]);
  }
  header += array.shape.size() == 1 ? ",), }" : "), }";
  // Like NumPy: pad with spaces and a newline so the data starts on a
  // 64-byte boundary.
  size_t prefix = kMagicSize + 2 + 2;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';

  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error) {
  std::vector<uint8_t> bytes = serializeNpy(array);
  // A hidden, unique name next to `path`: rename() is atomic only within one
  // file system.
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  static int counter = 0;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = dir + "." + base + ".tmp" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      break;
    }
  }
  if (fd < 0) {
    error = path + ": cannot create a temporary file: " + std::strerror(errno);
    return false;
  }
  const char *step = nullptr;
  if (!writeAll(fd, bytes.data(), bytes.size())) {
    step = "write";
  } else if (::fsync(fd) != 0) {
    step = "fsync";
  }
  int savedErrno = errno;
  if (::close(fd) != 0 && !step) {
    step = "close";
    savedErrno = errno;
  }
  if (!step && ::rename(temp.c_str(), path.c_str()) != 0) {
    step = "rename";
    savedErrno = errno;
  }
  if (step) {
    ::unlink(temp.c_str());
    error =
        path + ": cannot write (" + step + "): " + std::strerror(savedErrno);
    return false;
  }
  return true;
}

} // namespace tailor
