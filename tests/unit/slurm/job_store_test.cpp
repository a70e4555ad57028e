// The plugin's kept job records on a real directory: found only when whole,
// asked about the same names and the plugin's own; gone with the job.
#include "slurm/job_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/fake_host.h"

namespace tally::slurm {
namespace {

using tally::testing::makeDirs;
using tally::testing::makeSymlink;
using tally::testing::readFile;
using tally::testing::TempDir;
using tally::testing::writeFile;

const std::vector<std::string> kNames = {"tallymem"};
// The id of the job's cgroup on this node for the run the records are of.
constexpr std::uint64_t kRun = 8812;

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

TEST(JobStore, AKeptRecordIsFoundByItsJobAndNames) {
  TempDir t;
  const std::string dir = t.path() + "/jobs";
  ASSERT_TRUE(keepJobRecord(
      dir, {.job = 42, .cgroupId = kRun, .asked = kNames, .gres = GresFound{"tallymem", 64 << 20}},
      ""));
  ASSERT_TRUE(keepJobRecord(dir, {.job = 43, .cgroupId = kRun, .asked = kNames}, ""));
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(readFile(dir + "/job_42"),
            "tally-slurm-job 2 job=42 cgroup=8812 asked=tallymem gres=tallymem:67108864\n");

  auto r = findJobRecord(dir, 42, kRun, kNames);
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->gres);
  EXPECT_EQ(r->gres->count, 64u << 20);
  auto none = findJobRecord(dir, 43, kRun, kNames);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->gres);  // "holds none here" is an answer too
  EXPECT_FALSE(findJobRecord(dir, 44, kRun, kNames));
  // Asked about other names (plugstack.conf changed): not an answer.
  EXPECT_FALSE(findJobRecord(dir, 43, kRun, {"tallymem", "gpumem"}));
  EXPECT_FALSE(findJobRecord("", 42, kRun, kNames));  // job_cache=off

  forgetJobRecord(dir, 42);
  EXPECT_FALSE(exists(dir + "/job_42"));
  EXPECT_FALSE(findJobRecord(dir, 42, kRun, kNames));
}

// A requeued job runs in a new job_J cgroup here: its steps never take the
// old run's record (its GRES may have been raised while it was pending), and
// an unknown cgroup finds no record and keeps none.
TEST(JobStore, ARequeuedJobsNewRunFindsNoneOfItsOldRunsRecord) {
  TempDir t;
  const std::string dir = t.path() + "/jobs";
  ASSERT_TRUE(keepJobRecord(
      dir, {.job = 42, .cgroupId = kRun, .asked = kNames, .gres = GresFound{"tallymem", 64}}, ""));
  ASSERT_TRUE(findJobRecord(dir, 42, kRun, kNames));
  EXPECT_FALSE(findJobRecord(dir, 42, kRun + 1, kNames)) << "the old run's record";
  EXPECT_FALSE(findJobRecord(dir, 42, 0, kNames)) << "a cgroup whose id could not be read";
  auto unkeyed = keepJobRecord(dir, {.job = 43, .asked = kNames}, "");
  ASSERT_FALSE(unkeyed);
  EXPECT_NE(unkeyed.error().message.find("its cgroup's id is unknown"), std::string::npos)
      << unkeyed.error().message;
  // The new run keeps its own, in place of the old.
  ASSERT_TRUE(keepJobRecord(
      dir, {.job = 42, .cgroupId = kRun + 1, .asked = kNames, .gres = GresFound{"tallymem", 128}},
      ""));
  auto now = findJobRecord(dir, 42, kRun + 1, kNames);
  ASSERT_TRUE(now && now->gres);
  EXPECT_EQ(now->gres->count, 128u);
  EXPECT_FALSE(findJobRecord(dir, 42, kRun, kNames));
  // The id is the kernel's: a directory's inode, 0 for anything else.
  makeDirs(t.path() + "/job_7");
  struct stat st {};
  ASSERT_EQ(::stat((t.path() + "/job_7").c_str(), &st), 0);
  EXPECT_EQ(cgroupIdOf(t.path() + "/job_7"), st.st_ino);
  EXPECT_EQ(cgroupIdOf(t.path() + "/absent"), 0u);
  writeFile(t.path() + "/file", "x");
  EXPECT_EQ(cgroupIdOf(t.path() + "/file"), 0u);
}

// A record decides whether a step is leased: one anyone else could have
// written, or that is not a whole record, is no record.
TEST(JobStore, ARecordOthersCouldWriteOrThatIsNotWholeIsNone) {
  TempDir t;
  const std::string dir = t.path() + "/jobs";
  ASSERT_TRUE(keepJobRecord(dir, {.job = 42, .cgroupId = kRun, .asked = kNames}, ""));
  ASSERT_TRUE(findJobRecord(dir, 42, kRun, kNames));

  ASSERT_EQ(::chmod((dir + "/job_42").c_str(), 0622), 0);
  EXPECT_FALSE(findJobRecord(dir, 42, kRun, kNames)) << "a file others may write";
  ASSERT_EQ(::chmod((dir + "/job_42").c_str(), 0600), 0);
  ASSERT_TRUE(findJobRecord(dir, 42, kRun, kNames));

  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_FALSE(findJobRecord(dir, 42, kRun, kNames)) << "a directory others may write";
  auto refused = keepJobRecord(dir, {.job = 43, .cgroupId = kRun, .asked = kNames}, "");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("is not this user's alone (chown it to root, chmod 0700)"),
            std::string::npos)
      << refused.error().message;
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);

  writeFile(t.path() + "/elsewhere",
            "tally-slurm-job 2 job=44 cgroup=8812 asked=tallymem gres=none\n");
  ASSERT_EQ(::chmod((t.path() + "/elsewhere").c_str(), 0600), 0);
  makeSymlink(t.path() + "/elsewhere", dir + "/job_44");
  EXPECT_FALSE(findJobRecord(dir, 44, kRun, kNames)) << "a symlink";

  writeFile(dir + "/job_45", "tally-slurm-job 2 job=45 cgroup=8812 asked=tallymem gres=no");
  ASSERT_EQ(::chmod((dir + "/job_45").c_str(), 0600), 0);
  EXPECT_FALSE(findJobRecord(dir, 45, kRun, kNames)) << "cut short";
  writeFile(dir + "/job_46", "tally-slurm-job 2 job=47 cgroup=8812 asked=tallymem gres=none\n");
  ASSERT_EQ(::chmod((dir + "/job_46").c_str(), 0600), 0);
  EXPECT_FALSE(findJobRecord(dir, 46, kRun, kNames)) << "another job's record";

  makeSymlink(dir, t.path() + "/link");
  EXPECT_FALSE(findJobRecord(t.path() + "/link", 42, kRun, kNames)) << "a symlinked directory";
}

// Without PrologFlags=Contain no extern step removes a job's record: the next
// record kept removes those whose job has no cgroup left, and leftovers of an
// interrupted write with them.
TEST(JobStore, RecordsOfJobsWhoseCgroupIsGoneAreRemoved) {
  TempDir t;
  const std::string dir = t.path() + "/jobs", cgroups = t.path() + "/slurmstepd.scope";
  // Job 7 runs in a job_J cgroup, job 11 in a SLUID-named one (Slurm 26.05);
  // job 8's cgroup is gone, and job 12's record is of an earlier run (its
  // cgroup now has another id).
  makeDirs(cgroups + "/job_7");
  makeDirs(cgroups + "/sEBHM95T5EZZ00");
  const std::uint64_t run7 = cgroupIdOf(cgroups + "/job_7");
  const std::uint64_t run11 = cgroupIdOf(cgroups + "/sEBHM95T5EZZ00");
  ASSERT_NE(run7, 0u);
  // Ids no cgroup here has (a small inode could be 8812 on tmpfs).
  constexpr std::uint64_t kGone = 1ULL << 62;
  for (auto [job, run] : {std::pair{7u, run7}, std::pair{8u, kGone}, std::pair{11u, run11},
                          std::pair{12u, kGone + 1}})
    ASSERT_TRUE(keepJobRecord(dir, {.job = job, .cgroupId = run, .asked = kNames}, ""));
  writeFile(dir + "/.job_8.123", "tally-slurm-job 2 job=8 cgroup=8812 asked=tallymem gres=no");
  writeFile(dir + "/.job_7.124", "tally-slurm-job 2 job=7 cgroup=8812 asked=tallymem gres=no");
  writeFile(dir + "/notes", "not ours to remove");
  writeFile(dir + "/job_8.said", "tally vm: GPU peak 0 B of 64.0 MiB");
  writeFile(dir + "/job_7.said", "tally vm: GPU peak 0 B of 64.0 MiB");
  writeFile(dir + "/job_x.said", "not ours to remove");

  ASSERT_TRUE(keepJobRecord(dir, {.job = 9, .cgroupId = kRun, .asked = kNames}, cgroups));
  EXPECT_TRUE(exists(dir + "/job_7"));  // job 7 still runs here
  EXPECT_TRUE(exists(dir + "/.job_7.124"));
  EXPECT_TRUE(exists(dir + "/job_11")) << "a SLUID-named job cgroup is found by its id";
  EXPECT_FALSE(exists(dir + "/job_8"));
  EXPECT_FALSE(exists(dir + "/.job_8.123"));
  EXPECT_FALSE(exists(dir + "/job_8.said"));
  EXPECT_FALSE(exists(dir + "/job_12")) << "an earlier run's record";
  EXPECT_TRUE(exists(dir + "/job_7.said"));
  EXPECT_TRUE(exists(dir + "/job_x.said"));
  EXPECT_TRUE(exists(dir + "/job_9"));  // the one just kept, whatever its cgroup
  EXPECT_TRUE(exists(dir + "/notes"));

  // No jobs directory to look in: nothing is removed.
  ASSERT_TRUE(
      keepJobRecord(dir, {.job = 10, .cgroupId = kRun, .asked = kNames}, t.path() + "/absent"));
  EXPECT_TRUE(exists(dir + "/job_9"));
}

// The line a step here last wrote into the job's AdminComment: read back by
// the next step, held locked while one step decides, gone with the job.
TEST(JobStore, TheSaidLineIsReadBackUnderALockAndGoesWithTheJob) {
  TempDir t;
  const std::string dir = t.path() + "/jobs";
  ASSERT_TRUE(
      keepJobRecord(dir, {.job = 42, .cgroupId = kRun, .asked = kNames, .jobLease = "ab12"}, ""));
  auto kept = findJobRecord(dir, 42, kRun, kNames);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->jobLease, "ab12");  // the job's lease here, for its later steps
  const std::string line = "tally vm: GPU peak 128.0 MiB of 256.0 MiB";
  {
    auto said = lockSaidLine(dir, 42);
    ASSERT_TRUE(said) << said.error().message;
    EXPECT_EQ(said->last(), "");  // nothing written yet
    // Held: another step's open of the same file cannot take the lock.
    int other = ::open((dir + "/job_42.said").c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(other, 0);
    EXPECT_NE(::flock(other, LOCK_EX | LOCK_NB), 0);
    EXPECT_EQ(errno, EWOULDBLOCK);
    ASSERT_TRUE(said->remember(line + " and more text than the next"));
    ASSERT_TRUE(said->remember(line));
    EXPECT_EQ(said->last(), line);
    ::close(other);
  }
  {
    int other = ::open((dir + "/job_42.said").c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(other, 0);
    EXPECT_EQ(::flock(other, LOCK_EX | LOCK_NB), 0) << "released when the holder is gone";
    ::close(other);
  }
  auto again = lockSaidLine(dir, 42);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->last(), line);  // rewritten in place, whole
  EXPECT_EQ(readFile(dir + "/job_42.said"), line);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/job_42.said").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  forgetJobRecord(dir, 42);
  EXPECT_FALSE(exists(dir + "/job_42"));
  EXPECT_FALSE(exists(dir + "/job_42.said"));
  // Not the plugin's own directory: no line to trust or keep.
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_FALSE(lockSaidLine(dir, 43));
  EXPECT_FALSE(lockSaidLine(t.path() + "/absent", 43));
}

}  // namespace
}  // namespace tally::slurm
