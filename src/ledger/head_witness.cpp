#include "ledger/head_witness.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/text.h"
#include "util/unique_fd.h"

namespace tally::ledger {
namespace {

Error ioError(int err, const std::string& what, const std::string& path) {
  return Error{err, fmt::format("{} {}: {}", what, path, std::strerror(err))};
}

Status writeAll(int fd, std::string_view s, const std::string& path) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ioError(n < 0 ? errno : EIO, "cannot write", path);
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return Ok{};
}

// The file's text, or nullopt when it does not exist. At most 255 bytes are
// read: more than that is not a witness (the decoder says so).
Result<std::optional<std::string>> readSmall(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ioError(errno, "cannot open the ledger's head witness", path);
  }
  std::array<char, 256> buf;
  std::string out;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ioError(errno, "cannot read the ledger's head witness", path);
    if (n == 0) break;
    out.append(buf.data(), static_cast<std::size_t>(n));
    if (out.size() >= buf.size()) break;
  }
  return std::optional<std::string>(std::move(out));
}

}  // namespace

std::string headWitnessPath(const std::string& dbPath) { return dbPath + ".head"; }

Result<std::optional<Head>> readHead(const std::string& dbPath) {
  std::string path = headWitnessPath(dbPath);
  auto text = readSmall(path);
  if (!text) return text.error();
  if (!*text) return std::optional<Head>();
  auto h = decodeHead(**text);
  if (!h) return Error{h.error().code, fmt::format("{} ({})", h.error().message, path)};
  return std::optional<Head>(std::move(*h));
}

namespace {
Status moveHead(const std::string& dbPath, const Head& h, bool onlyForward) {
  const std::string path = headWitnessPath(dbPath);
  const std::string lockPath = path + ".lock";
  UniqueFd lock(::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock.valid()) return ioError(errno, "cannot open", lockPath);
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR) return ioError(errno, "cannot lock", lockPath);
  // A later row already witnessed (another writer committed after us): keep it.
  if (auto cur = readHead(dbPath); onlyForward && cur && *cur && (*cur)->seq >= h.seq) return Ok{};
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ioError(errno, "cannot create", tmp);
  if (auto s = writeAll(fd.get(), encodeHead(h), tmp); !s) return s;
  if (::fsync(fd.get()) != 0) return ioError(errno, "cannot sync", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ioError(errno, "cannot rename over", path);
  return Ok{};
}
}  // namespace

Status advanceHead(const std::string& dbPath, const Head& h) { return moveHead(dbPath, h, true); }
Status resetHead(const std::string& dbPath, const Head& h) { return moveHead(dbPath, h, false); }

}  // namespace tally::ledger
