//===- TrainTestUtil.h - scratch directories and files for trainer tests -===//

#ifndef TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H
#define TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H

#include "runtime/train/AtomicFile.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

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

/// The id of a process that has exited (a child reaped at once), as a
/// writer killed earlier left in its temporaries' names.
inline long deadProcessId() {
  pid_t child = ::fork();
  if (child == 0) {
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return static_cast<long>(child);
}

/// Creates `path` (and its parents) holding one file `name` with `text`.
inline void plantDirectory(const std::string &path, const std::string &name,
                           const std::string &text) {
  std::string ignored;
  makeDirectories(path, ignored);
  std::ofstream(path + "/" + name) << text;
}

} // namespace tailor::train::testing

#endif // TAILOR_TEST_RUNTIME_TRAIN_TRAINTESTUTIL_H
