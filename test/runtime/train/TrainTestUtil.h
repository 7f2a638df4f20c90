//===- TrainTestUtil.h - scratch directories and files for trainer tests -===//

#ifndef TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H
#define TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H

#include "runtime/train/AtomicFile.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tailor::train::testing {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  explicit TempDir(const std::string &tag = "train") {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base ? base : "/tmp") + "/tailor-" + tag + "-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const char *made = mkdtemp(buffer.data());
    path = made ? made : "";
  }
  ~TempDir() {
    std::string ignored;
    if (!path.empty()) {
      removeTree(path, ignored);
    }
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string path;
};

/// The whole file, or "" if it cannot be read.
inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace tailor::train::testing

#endif // TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H
