//===- AtomicFile.cpp - files and directories that appear whole -----------===//

#include "runtime/train/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tailor::train {

static std::string errnoText(int code) { return std::strerror(code); }

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    return ".";
  }
  if (slash == 0) {
    return "/";
  }
  return path.substr(0, slash);
}

static std::string baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool syncDirectory(const std::string &dir, std::string &error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    error = dir + ": cannot open directory to sync: " + errnoText(errno);
    return false;
  }
  // Some file systems refuse fsync on directories (EINVAL); the rename is
  // then as durable as they make it, which is not ours to improve.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    error = dir + ": cannot sync directory: " + errnoText(errno);
    ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

bool makeDirectories(const std::string &path, std::string &error) {
  if (path.empty()) {
    return true;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (!S_ISDIR(info.st_mode)) {
      error = path + ": exists and is not a directory";
      return false;
    }
    return true;
  }
  std::string parent = parentDirectory(path);
  if (parent != path && parent != "." && parent != "/" &&
      !makeDirectories(parent, error)) {
    return false;
  }
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
    error = path + ": cannot create directory: " + errnoText(errno);
    return false;
  }
  return true;
}

bool removeTree(const std::string &path, std::string &error) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) {
      return true;
    }
    error = path + ": cannot stat: " + errnoText(errno);
    return false;
  }
  if (S_ISDIR(info.st_mode)) {
    DIR *dir = ::opendir(path.c_str());
    if (!dir) {
      error = path + ": cannot list: " + errnoText(errno);
      return false;
    }
    bool ok = true;
    while (struct dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      if (!removeTree(path + "/" + name, error)) {
        ok = false;
        break;
      }
    }
    ::closedir(dir);
    if (!ok) {
      return false;
    }
    if (::rmdir(path.c_str()) != 0) {
      error = path + ": cannot remove: " + errnoText(errno);
      return false;
    }
    return true;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    error = path + ": cannot remove: " + errnoText(errno);
    return false;
  }
  return true;
}

/// Parses a non-empty decimal process id of at most 9 digits.
static std::optional<long> parsePid(const std::string &text) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stol(text);
}

std::optional<Leftover> parseLeftover(const std::string &name) {
  // The names below are the ones AtomicFile::create and
  // AtomicDirectory::create/commit build.
  if (name.size() > 1 && name[0] == '.') {
    size_t tmp = name.rfind(".tmp-");
    size_t dash = name.rfind('-');
    if (tmp != std::string::npos && tmp > 1 && dash > tmp + 5) {
      std::optional<long> pid = parsePid(name.substr(tmp + 5, dash - tmp - 5));
      if (pid && parsePid(name.substr(dash + 1))) {
        return Leftover{Leftover::Kind::TemporaryFile, name.substr(1, tmp - 1),
                        *pid};
      }
    }
    return std::nullopt;
  }
  for (auto [suffix, kind] :
       {std::pair{".tmp-", Leftover::Kind::TemporaryDirectory},
        std::pair{".old-", Leftover::Kind::ReplacedDirectory}}) {
    size_t at = name.rfind(suffix);
    if (at == std::string::npos || at == 0) {
      continue;
    }
    if (std::optional<long> pid = parsePid(name.substr(at + 5))) {
      return Leftover{kind, name.substr(0, at), *pid};
    }
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// AtomicFile
//===----------------------------------------------------------------------===//

std::unique_ptr<AtomicFile> AtomicFile::create(const std::string &path,
                                               std::string &error) {
  std::unique_ptr<AtomicFile> file(new AtomicFile());
  file->finalPath = path;
  // A hidden, unique name in the same directory: several writers (threads,
  // or a stale file from a killed run) never collide.
  static int counter = 0;
  std::string dir = parentDirectory(path);
  std::string prefix = (path.find('/') == std::string::npos ? "" : dir + "/") +
                       "." + baseName(path) + ".tmp-" +
                       std::to_string(::getpid()) + "-";
  for (int attempt = 0; attempt < 100 && file->fd < 0; ++attempt) {
    file->tempPath = prefix + std::to_string(counter++);
    file->fd = ::open(file->tempPath.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (file->fd < 0 && errno != EEXIST) {
      break;
    }
  }
  if (file->fd < 0) {
    error = path + ": cannot create a temporary file: " + errnoText(errno);
    return nullptr;
  }
  return file;
}

AtomicFile::~AtomicFile() {
  if (fd >= 0) {
    ::close(fd);
  }
  if (!committed && !tempPath.empty()) {
    ::unlink(tempPath.c_str());
  }
}

bool AtomicFile::write(const void *data, size_t size) {
  if (!failure.empty()) {
    return false;
  }
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      failure = finalPath + ": cannot write: " + errnoText(errno);
      return false;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool AtomicFile::commit(std::string &error) {
  if (!failure.empty()) {
    error = failure;
    return false;
  }
  if (::fsync(fd) != 0) {
    error = finalPath + ": cannot sync: " + errnoText(errno);
    return false;
  }
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) {
    error = finalPath + ": cannot close: " + errnoText(errno);
    return false;
  }
  if (::rename(tempPath.c_str(), finalPath.c_str()) != 0) {
    error = finalPath + ": cannot rename into place: " + errnoText(errno);
    return false;
  }
  committed = true;
  return syncDirectory(parentDirectory(finalPath), error);
}

bool writeFileAtomically(const std::string &path, std::string_view contents,
                         std::string &error) {
  std::unique_ptr<AtomicFile> file = AtomicFile::create(path, error);
  if (!file) {
    return false;
  }
  file->write(contents);
  return file->commit(error);
}

//===----------------------------------------------------------------------===//
// AtomicDirectory
//===----------------------------------------------------------------------===//

std::unique_ptr<AtomicDirectory>
AtomicDirectory::create(const std::string &path, std::string &error) {
  std::unique_ptr<AtomicDirectory> dir(new AtomicDirectory());
  dir->finalPath = path;
  dir->temp = path + ".tmp-" + std::to_string(::getpid());
  // A directory of that name is debris from an earlier failure of this same
  // process id (pids are reused): never a checkpoint anyone can load.
  if (!removeTree(dir->temp, error)) {
    return nullptr;
  }
  if (::mkdir(dir->temp.c_str(), 0777) != 0) {
    error = dir->temp + ": cannot create directory: " + errnoText(errno);
    dir->temp.clear();
    return nullptr;
  }
  return dir;
}

AtomicDirectory::~AtomicDirectory() {
  if (!committed && !temp.empty()) {
    std::string ignored;
    removeTree(temp, ignored);
  }
}

bool AtomicDirectory::commit(std::string &error) {
  if (!syncDirectory(temp, error)) {
    return false;
  }
  std::string parent = parentDirectory(finalPath);
  struct stat info;
  bool replacing = ::lstat(finalPath.c_str(), &info) == 0;
  if (!replacing) {
    if (::rename(temp.c_str(), finalPath.c_str()) != 0) {
      error = finalPath + ": cannot rename into place: " + errnoText(errno);
      return false;
    }
    committed = true;
    return syncDirectory(parent, error);
  }

  // rename(2) cannot replace a non-empty directory. Swap the two atomically
  // where the file system can, so `finalPath` always names a complete
  // directory; otherwise move the old one aside first.
  std::string old = finalPath + ".old-" + std::to_string(::getpid());
  if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, finalPath.c_str(),
                  RENAME_EXCHANGE) == 0) {
    committed = true;
    // The old directory now sits at the temporary name.
    if (::rename(temp.c_str(), old.c_str()) != 0) {
      old = temp;
    }
  } else {
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
      error = finalPath + ": cannot replace: " + errnoText(errno);
      return false;
    }
    if (!removeTree(old, error)) {
      return false;
    }
    if (::rename(finalPath.c_str(), old.c_str()) != 0) {
      error = finalPath +
              ": cannot move the old directory aside: " + errnoText(errno);
      return false;
    }
    if (::rename(temp.c_str(), finalPath.c_str()) != 0) {
      int saved = errno;
      // Put the old one back: a failed save must not lose it.
      ::rename(old.c_str(), finalPath.c_str());
      error = finalPath + ": cannot rename into place: " + errnoText(saved);
      return false;
    }
    committed = true;
  }
  if (!syncDirectory(parent, error)) {
    return false;
  }
  return removeTree(old, error);
}

} // namespace tailor::train
