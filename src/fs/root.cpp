#include "fs/root.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tally::fs {
namespace {

// Paths handed to *at() are relative; a leading '/' would escape the root.
std::string relative(std::string_view rel) {
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return rel.empty() ? std::string(".") : std::string(rel);
}

// struct linux_dirent64 without its flexible name member (not ISO C++); the
// NUL-terminated name starts right after d_type.
struct LinuxDirent64 {
  std::uint64_t d_ino;
  std::int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
};
constexpr std::size_t kDirentNameOffset = offsetof(LinuxDirent64, d_type) + 1;

}  // namespace

std::string_view baseName(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view parentPath(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return {};
  return slash == 0 ? path.substr(0, 1) : path.substr(0, slash);
}

std::string joinPath(std::string_view dir, std::string_view name) {
  while (!dir.empty() && dir.back() == '/') dir.remove_suffix(1);
  while (!dir.empty() && dir.front() == '/') dir.remove_prefix(1);
  std::string out(dir);
  if (!out.empty()) out += '/';
  out += name;
  return out;
}

namespace {

int listEntries(int dirFd, const std::function<bool(std::string_view, unsigned char)>& fn,
                bool greedy) {
  alignas(LinuxDirent64) std::array<char, 32768> buf;
  // More than the largest entry (a 255-byte name in a 280-byte record).
  constexpr long kRoomForMore = 512;
  for (;;) {
    long n = ::syscall(SYS_getdents64, dirFd, buf.data(), buf.size());
    if (n < 0) return errno;
    if (n == 0) return 0;
    for (long off = 0; off < n;) {
      const char* entry = buf.data() + off;
      const auto* d = reinterpret_cast<const LinuxDirent64*>(entry);
      off += d->d_reclen;
      std::string_view name(entry + kDirentNameOffset);
      if (name == "." || name == "..") continue;
      if (!fn(name, d->d_type)) return 0;
    }
    if (greedy && static_cast<long>(buf.size()) - n >= kRoomForMore) return 0;
  }
}

}  // namespace

int forEachEntry(int dirFd, const std::function<bool(std::string_view, unsigned char)>& fn) {
  return listEntries(dirFd, fn, false);
}

int forEachEntryGreedy(int dirFd, const std::function<bool(std::string_view, unsigned char)>& fn) {
  return listEntries(dirFd, fn, true);
}

Result<std::string_view> readAt(int dirFd, const char* rel, std::span<char> buf,
                                std::string& spill) {
  UniqueFd fd(::openat(dirFd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return Error{errno, rel};
  ssize_t n = ::read(fd.get(), buf.data(), buf.size());
  if (n < 0) return Error{errno, rel};
  auto got = static_cast<std::size_t>(n);
  if (got < buf.size()) return std::string_view(buf.data(), got);
  // Filled the buffer: the file may be longer. Rare; read on into the heap.
  spill.assign(buf.data(), got);
  std::array<char, 4096> more;
  for (;;) {
    n = ::read(fd.get(), more.data(), more.size());
    if (n < 0) return Error{errno, rel};
    if (n == 0) break;
    spill.append(more.data(), static_cast<std::size_t>(n));
    if (spill.size() > (std::size_t{16} << 20)) return Error{EFBIG, rel};
  }
  return std::string_view(spill);
}

Result<Root> Root::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errnoError(errno, "cannot open " + path);
  return Root(std::move(fd), path);
}

std::string Root::describe(std::string_view rel) const {
  if (relative(rel) == ".") return path_;
  std::string out = path_;
  if (!out.empty() && out.back() != '/') out += '/';
  out += relative(rel);
  return out;
}

Result<std::string> Root::read(std::string_view rel, std::size_t limit) const {
  // The same single-read path as the scanner's fdinfo reads: sysfs and procfs
  // attributes arrive whole in one read() when the buffer can hold them.
  std::string r = relative(rel);
  std::array<char, 8192> buf;
  std::string spill;
  auto text = readAt(fd_.get(), r.c_str(), buf, spill);
  if (!text) return errnoError(text.error().code, "cannot read " + describe(rel));
  if (text->size() > limit) return Error{EFBIG, describe(rel) + " is larger than expected"};
  return std::string(*text);
}

Result<std::string> Root::readLink(std::string_view rel) const {
  std::string r = relative(rel);
  std::array<char, 4096> buf;
  ssize_t n = ::readlinkat(fd_.get(), r.c_str(), buf.data(), buf.size());
  if (n < 0) return errnoError(errno, "cannot read link " + describe(rel));
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

Result<struct stat> Root::stat(std::string_view rel) const {
  std::string r = relative(rel);
  struct stat st {};
  if (::fstatat(fd_.get(), r.c_str(), &st, 0) != 0)
    return errnoError(errno, "cannot stat " + describe(rel));
  return st;
}

bool Root::exists(std::string_view rel) const {
  std::string r = relative(rel);
  return ::faccessat(fd_.get(), r.c_str(), F_OK, 0) == 0;
}

Result<std::vector<std::string>> Root::list(std::string_view rel) const {
  std::string r = relative(rel);
  UniqueFd dir(::openat(fd_.get(), r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return errnoError(errno, "cannot open directory " + describe(rel));
  std::vector<std::string> names;
  int rc = forEachEntry(dir.get(), [&](std::string_view name, unsigned char) {
    names.emplace_back(name);
    return true;
  });
  if (rc != 0) return errnoError(rc, "cannot list " + describe(rel));
  return names;
}

Status Root::write(std::string_view rel, std::string_view value) const {
  std::string r = relative(rel);
  UniqueFd fd(
      ::openat(fd_.get(), r.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!fd.valid()) return errnoError(errno, "open " + describe(rel));
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n != static_cast<ssize_t>(value.size())) {
    return errnoError(n < 0 ? errno : EIO, fmt::format("write '{}' to {}", value, describe(rel)));
  }
  return Ok{};
}

Result<Root> Root::openDirBeneath(std::string_view rel) const {
  std::string r = relative(rel);
  if (r.empty()) r = ".";
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, fd_.get(), r.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS) {
    // Before Linux 5.6: one component at a time, none of them a symlink.
    UniqueFd cur(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    std::string_view rest = r;
    while (cur.valid() && !rest.empty()) {
      auto slash = rest.find('/');
      std::string part(rest.substr(0, slash));
      rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
      if (part.empty() || part == ".") continue;
      if (part == "..") {
        errno = EXDEV;
        cur.reset();
        break;
      }
      cur.reset(::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    }
    fd = cur.valid() ? cur.release() : -1;
  }
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP)
      return Error{e, describe(rel) + " is reached through a symlink; name the cgroup itself"};
    if (e == EXDEV) return Error{e, describe(rel) + " leads outside " + path_};
    return errnoError(e, "cannot open directory " + describe(rel));
  }
  return Root(UniqueFd(fd), describe(rel));
}

Result<struct stat> Root::statSelf() const {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return errnoError(errno, "cannot stat " + path_);
  return st;
}

Result<struct stat> Root::lstat(std::string_view rel) const {
  std::string r = relative(rel);
  struct stat st {};
  if (::fstatat(fd_.get(), r.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errnoError(errno, "cannot stat " + describe(rel));
  return st;
}

}  // namespace tally::fs
