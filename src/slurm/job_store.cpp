#include "slurm/job_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

namespace tally::slurm {

namespace {

// A descriptor closed on every path out.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Owned by this process's user, writable by no one else: only then is what
// it holds the plugin's own word.
bool ownOnly(int fd, mode_t type) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type && st.st_uid == ::geteuid() &&
         (st.st_mode & 022) == 0;
}

Fd openDir(const std::string& dir) {
  return Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

std::string saidLineName(std::uint32_t job) { return jobRecordName(job) + ".said"; }

// The job a directory entry belongs to: its record "job_J", its said line
// "job_J.said", or a leftover of an interrupted write ".job_J.PID".
std::optional<std::uint32_t> jobOfEntry(std::string_view name) {
  std::string_view recordName = name;
  if (name.size() > 1 && name[0] == '.') recordName = name.substr(1, name.find('.', 1) - 1);
  constexpr std::string_view kSaid = ".said";
  if (recordName.size() > kSaid.size() && recordName.ends_with(kSaid))
    recordName.remove_suffix(kSaid.size());
  return jobOfRecordName(recordName);
}

// The record `name` in `dir`, when it is one whole record (and, with
// `ownFileOnly`, a file of this user's alone); none otherwise.
std::optional<JobRecord> readRecord(int dir, const char* name, bool ownFileOnly) {
  Fd f(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (f.fd < 0 || (ownFileOnly && !ownOnly(f.fd, S_IFREG))) return std::nullopt;
  char buf[1024];  // a record is at most ~700 bytes (job_record.h); larger is none
  ssize_t n = ::read(f.fd, buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) == sizeof buf) return std::nullopt;
  auto r = decodeJobRecord(std::string_view(buf, static_cast<std::size_t>(n)));
  if (!r) return std::nullopt;
  return std::move(*r);
}

// Calls `each(name)` for every entry of the directory `dir` (an fd it does not close).
template <typename Each>
void listDir(int dir, Each&& each) {
  int listed = ::dup(dir);
  if (listed < 0) return;
  DIR* d = ::fdopendir(listed);
  if (!d) {
    ::close(listed);
    return;
  }
  ::rewinddir(d);
  while (struct dirent* e = ::readdir(d)) each(e->d_name);
  ::closedir(d);
}

// The records (with their said lines and leftovers) of job runs whose cgroup
// is gone from `jobsCgroupDir`: a record names its run's cgroup by the
// kernel's id (job_record.h), and the directory's cgroups are listed by
// theirs, so either of Slurm's names for a job's cgroup serves (job_J, or
// the SLUID 26.05 names it by). The records are read before the cgroups are
// listed: a record is kept from inside its run's cgroup, so a record read is
// of a cgroup that existed first, and one that is gone at the listing is
// gone. Only the files of jobs whose record was read as gone go: a record,
// a said line or a leftover written by another step meanwhile is not touched.
void pruneGone(int dir, std::uint32_t keep, const std::string& jobsCgroupDir) {
  Fd jobs = openDir(jobsCgroupDir);
  if (jobsCgroupDir.empty() || jobs.fd < 0)
    return;  // no place to tell a gone run from a live one: remove nothing
  std::map<std::uint32_t, std::uint64_t> runs;  // job -> its record's cgroup id
  listDir(dir, [&](const char* name) {
    auto job = jobOfRecordName(name);
    if (!job || *job == keep) return;
    auto r = readRecord(dir, name, false);               // whose it is does not matter to pruning
    runs[*job] = r && r->job == *job ? r->cgroupId : 0;  // 0: not a record of ours to keep
  });
  std::set<std::uint64_t> live;
  listDir(jobs.fd, [&](const char* name) {
    struct stat st {};
    if (name[0] != '.' && ::fstatat(jobs.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
      live.insert(st.st_ino);
  });
  std::set<std::uint32_t> gone;
  for (const auto& [job, run] : runs)
    if (!live.count(run)) gone.insert(job);
  if (gone.empty()) return;
  listDir(dir, [&](const char* name) {
    if (auto job = jobOfEntry(name); job && gone.count(*job)) ::unlinkat(dir, name, 0);
  });
}

}  // namespace

std::uint64_t cgroupIdOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
  return st.st_ino;
}

std::optional<JobRecord> findJobRecord(const std::string& dir, std::uint32_t job,
                                       std::uint64_t jobCgroupId,
                                       const std::vector<std::string>& names) {
  if (dir.empty() || jobCgroupId == 0) return std::nullopt;
  Fd d = openDir(dir);
  if (d.fd < 0 || !ownOnly(d.fd, S_IFDIR)) return std::nullopt;
  auto r = readRecord(d.fd, jobRecordName(job).c_str(), true);
  // Another run's (the job was requeued) is no answer for this one.
  if (!r || r->job != job || r->cgroupId != jobCgroupId || r->asked != names) return std::nullopt;
  return std::move(*r);
}

Status keepJobRecord(const std::string& dir, const JobRecord& r, const std::string& jobsCgroupDir) {
  if (r.cgroupId == 0)  // it would be found by no run of the job
    return Error{EINVAL,
                 fmt::format("cannot keep job {}'s GRES: its cgroup's id is unknown", r.job)};
  auto fail = [&](const char* what) {
    int err = errno;
    return Error{err, fmt::format("cannot keep job {}'s GRES in {}: {}: {}", r.job, dir, what,
                                  std::strerror(err))};
  };
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fail("mkdir");
  Fd d = openDir(dir);
  if (d.fd < 0) return fail("open");
  if (!ownOnly(d.fd, S_IFDIR)) {
    errno = EPERM;
    return fail("the directory is not this user's alone (chown it to root, chmod 0700)");
  }
  std::string aside = fmt::format(".{}.{}", jobRecordName(r.job), ::getpid());
  std::string text = encodeJobRecord(r);
  {
    Fd f(
        ::openat(d.fd, aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.fd < 0) return fail("create");
    if (::write(f.fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      int err = errno;
      ::unlinkat(d.fd, aside.c_str(), 0);
      errno = err ? err : EIO;
      return fail("write");
    }
  }
  if (::renameat(d.fd, aside.c_str(), d.fd, jobRecordName(r.job).c_str()) != 0) {
    int err = errno;
    ::unlinkat(d.fd, aside.c_str(), 0);
    errno = err;
    return fail("rename");
  }
  pruneGone(d.fd, r.job, jobsCgroupDir);
  return Ok{};
}

void forgetJobRecord(const std::string& dir, std::uint32_t job) {
  if (dir.empty()) return;
  Fd d = openDir(dir);
  if (d.fd < 0 || !ownOnly(d.fd, S_IFDIR)) return;
  ::unlinkat(d.fd, jobRecordName(job).c_str(), 0);
  ::unlinkat(d.fd, saidLineName(job).c_str(), 0);
}

SaidLine::~SaidLine() {
  if (fd_ >= 0) ::close(fd_);  // and with it the lock
}

Status SaidLine::remember(const std::string& line) {
  // Rewritten in place, not renamed: the lock is on this file.
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    int err = errno;
    [[maybe_unused]] int cut = ::ftruncate(fd_, 0);  // half a line is no line
    return Error{err, fmt::format("cannot keep the AdminComment line: {}", std::strerror(err))};
  }
  last_ = line;
  return Ok{};
}

Result<SaidLine> lockSaidLine(const std::string& dir, std::uint32_t job) {
  auto fail = [&](const char* what) {
    int err = errno;
    return Error{err, fmt::format("cannot lock job {}'s AdminComment line in {}: {}: {}", job, dir,
                                  what, std::strerror(err))};
  };
  Fd d = openDir(dir);
  if (d.fd < 0) return fail("open");
  if (!ownOnly(d.fd, S_IFDIR)) {
    errno = EPERM;
    return fail("the directory is not this user's alone");
  }
  int fd =
      ::openat(d.fd, saidLineName(job).c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail("open");
  SaidLine said(fd, "");
  while (::flock(fd, LOCK_EX) != 0)
    if (errno != EINTR) return fail("flock");
  if (!ownOnly(fd, S_IFREG)) return said;  // someone else's words: as if none were said
  char buf[1024];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n > 0 && static_cast<std::size_t>(n) < sizeof buf)
    said.last_.assign(buf, static_cast<std::size_t>(n));
  return said;
}

}  // namespace tally::slurm
