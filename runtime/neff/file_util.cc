#include "file_util.h"

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

absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot create '", tmp, "': ", std::strerror(errno)));
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
