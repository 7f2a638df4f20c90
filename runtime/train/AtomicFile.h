//===- AtomicFile.h - files and directories that appear whole --*- C++ -*-===//
//
// Checkpoints and final adapters must never be seen half-written: a crash,
// a full disk or a second Ctrl-C leaves either the old contents or the new
// ones under the final name. Files are written under a temporary name in the
// same directory (rename(2) is atomic only within one file system), synced,
// renamed, and the directory synced so the rename itself survives a crash.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_TRAIN_ATOMICFILE_H
#define TAILOR_RUNTIME_TRAIN_ATOMICFILE_H

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tailor::train {

/// A file being written under a temporary name next to `path`; `commit`
/// renames it into place. Destroying an uncommitted file removes the
/// temporary, so `path` is never touched by a failed write.
class AtomicFile {
public:
  /// Creates the temporary file; null and `error` on failure.
  static std::unique_ptr<AtomicFile> create(const std::string &path,
                                            std::string &error);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// Appends `size` bytes; on failure the error is kept for `commit`.
  bool write(const void *data, size_t size);
  bool write(std::string_view text) { return write(text.data(), text.size()); }
  /// Syncs the data, renames it to the final path and syncs the directory.
  bool commit(std::string &error);

  const std::string &path() const { return finalPath; }

private:
  AtomicFile() = default;

  std::string finalPath;
  std::string tempPath;
  int fd = -1;
  std::string failure;
  bool committed = false;
};

/// Writes `contents` to `path` atomically.
bool writeFileAtomically(const std::string &path, std::string_view contents,
                         std::string &error);

/// fsync(2) on a directory, so renames and creations in it are durable.
bool syncDirectory(const std::string &dir, std::string &error);

/// Creates `path` and any missing parents (like `mkdir -p`).
bool makeDirectories(const std::string &path, std::string &error);

/// Removes `path` and everything below it; missing is not an error.
bool removeTree(const std::string &path, std::string &error);

/// A directory built under `<path>.tmp-<pid>` and renamed to `path` on
/// `commit`. An existing `path` is replaced only after the new directory is
/// complete (an atomic exchange where the file system supports it). An
/// uncommitted directory is removed when destroyed; `path` is untouched.
class AtomicDirectory {
public:
  static std::unique_ptr<AtomicDirectory> create(const std::string &path,
                                                 std::string &error);
  ~AtomicDirectory();
  AtomicDirectory(const AtomicDirectory &) = delete;
  AtomicDirectory &operator=(const AtomicDirectory &) = delete;

  /// Where to write the directory's files until `commit`.
  const std::string &tempPath() const { return temp; }
  const std::string &path() const { return finalPath; }
  /// Syncs the temporary directory and moves it into place.
  bool commit(std::string &error);

private:
  AtomicDirectory() = default;

  std::string finalPath;
  std::string temp;
  bool committed = false;
};

/// Something AtomicFile or AtomicDirectory creates beside its final name
/// and removes or renames when it finishes: only a writer killed mid-write
/// leaves one behind.
struct Leftover {
  enum class Kind {
    /// AtomicFile's `.<name>.tmp-<pid>-<n>`: never a complete file.
    TemporaryFile,
    /// AtomicDirectory's `<name>.tmp-<pid>`: never committed.
    TemporaryDirectory,
    /// AtomicDirectory's `<name>.old-<pid>`: the directory it replaced, the
    /// only copy of it while `<name>` is missing.
    ReplacedDirectory,
  };
  Kind kind;
  /// The final name the writer was producing, in the same directory.
  std::string target;
  /// The writing process.
  long pid = 0;
};

/// Whether the directory entry `name` is named as one of the writer's
/// temporaries, and which; std::nullopt for every other name.
std::optional<Leftover> parseLeftover(const std::string &name);

/// The directory part of `path` ("." when it has none).
std::string parentDirectory(const std::string &path);

} // namespace tailor::train

#endif // TAILOR_RUNTIME_TRAIN_ATOMICFILE_H
