#include "file_util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace neuroncc::files {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return ss.str();
}

namespace {

// "dir/.name.tmp.<pid>" for "dir/name": hidden beside its target, so the
// rename stays within one file system.
std::string TempPrefix(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return absl::StrCat(dir, ".", base, ".tmp.");
}

// Removes what an earlier writer of `path` left when it was killed between
// creating its temporary file and renaming it: files of the same prefix whose
// process no longer runs.
void RemoveStaleTemps(const std::string& path) {
  std::string prefix = TempPrefix(path);
  size_t slash = prefix.rfind('/');
  std::string dir = slash == std::string::npos ? "." : prefix.substr(0, slash);
  std::string name_prefix = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, name_prefix.size(), name_prefix) != 0) continue;
    std::string pid_text = name.substr(name_prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    pid_t pid = pid_t(std::stol(pid_text));
    if (pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH))
      std::remove(absl::StrCat(dir, "/", name).c_str());
  }
  ::closedir(d);
}

}  // namespace

absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  RemoveStaleTemps(path);
  std::string tmp = absl::StrCat(TempPrefix(path), ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create '", path, "': ", std::strerror(errno), " (writing its temporary file first)"));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if ((i == path.size() || path[i] == '/') && !cur.empty() && cur != "." && cur != "..") {
      struct stat st;
      if (::stat(cur.c_str(), &st) != 0) {
        if (::mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST)
          return absl::PermissionDeniedError(
              absl::StrCat("cannot create directory '", cur, "': ", std::strerror(errno)));
      } else if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat("'", cur, "' exists and is not a directory"));
      }
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
  return absl::OkStatus();
}

}  // namespace neuroncc::files
