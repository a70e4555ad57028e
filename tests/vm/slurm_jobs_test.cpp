// A Slurm job is one lease on the node and its steps children of it: batch
// and srun steps, overlapping steps, a job cancelled or out of time, a
// daemon restarted or slurmctld frozen around a step, --export=NONE. The
// fixture: slurm_fixture.h. VM harness only.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>

#include "slurm_fixture.h"

namespace tally {
namespace {

using namespace tally::vmslurm;

// The job is the lease (Slurm gives GRES to the job per node): its batch
// script's step and its srun step are children of it, each bounded by the
// job's count, the pool holding the job's 768 MiB of 1 GiB once.
TEST_F(VmSlurm, ABatchScriptAndItsSrunStepAreChildrenOfOneJobLease) {
  // An array of one task: its leases carry the array's ids.
  std::string idFile = kDir + "/f.job", arrayFile = kDir + "/f.array";
  auto r = runProgram({"sbatch", "--wait", "--array=5", "--gres=tallymem:768M", "--chdir=" + kDir,
                       "--output=" + kDir + "/f.out", "--wrap",
                       "echo $SLURM_JOB_ID > " + idFile + "; echo $SLURM_ARRAY_JOB_ID > " +
                           arrayFile + "; srun " + kWorkload + " gpu gtt 512 1 300"});
  EXPECT_EQ(r.exitCode(), 0) << r.out << r.err << readFile(kDir + "/f.out");
  std::string job = jobIdFrom(idFile);
  ASSERT_FALSE(job.empty()) << readFile(kDir + "/f.out");
  json jobRows = rowsNamed("slurm-" + job);
  json batch = rowsNamed("slurm-" + job + ".batch");
  json step = rowsNamed("slurm-" + job + ".0");
  ASSERT_FALSE(jobRows.empty());
  ASSERT_FALSE(batch.empty());
  ASSERT_FALSE(step.empty());
  std::string jobLease = jobRows[0].value("lease", "");
  EXPECT_EQ(jobRows[0]["body"]["pools"], json::array({"slurm"}));
  EXPECT_EQ(jobRows[0]["body"]["declared"]["gpu_memory_max"], 768 * kMiB);
  EXPECT_TRUE(isJobCgroup(jobRows[0]["body"]["target"].value("cgroup", ""), job))
      << jobRows[0].dump(2);
  for (const json* rows : {&batch, &step}) {
    const json& granted = (*rows)[0]["body"];
    EXPECT_EQ(granted["parent"], jobLease) << granted.dump(2);
    EXPECT_EQ(granted["pools"], json::array()) << "counted once, in the job's lease";
    EXPECT_EQ(granted["declared"]["gpu_memory_max"], 768 * kMiB) << "the job's GRES";
    const json& attrs = granted["declared"]["attributes"];
    EXPECT_EQ(attrs.value("slurm_array_job_id", ""), jobIdFrom(arrayFile)) << attrs;
    EXPECT_EQ(attrs.value("slurm_array_task_id", ""), "5") << attrs;
  }
  EXPECT_EQ(batch[0]["body"]["declared"]["attributes"]["slurm_step_id"], "batch");
  json stepEnd = terminal(step);
  ASSERT_TRUE(stepEnd.is_object());
  EXPECT_EQ(stepEnd["body"]["outcome"]["class"], "ended") << stepEnd.dump(2);
  EXPECT_EQ(stepEnd["body"]["gpu"]["peak_bytes"], 512 * kMiB) << stepEnd.dump(2);
  ASSERT_TRUE(terminal(batch).is_object());
  EXPECT_EQ(terminal(batch)["body"]["outcome"]["class"], "ended");
  ASSERT_TRUE(eventually([&] { return terminal(rowsNamed("slurm-" + job)).is_object(); }, 30s))
      << "the job's lease ends with the job";
  expectPagesQuote({"docs/slurm.md"}, "tests/vm/slurm_jobs_test.cpp#batch-ledger",
                   tally({"ledger", "--config", kConfig, "--last", "3"}).out);
}

// Every step of a job holds all its GRES: two --overlap steps running at
// once count the job's 768 MiB once (as two leases they would need 1.5 GiB
// of a 1 GiB budget), are each bounded by it, and together by it in the
// kernel. With PrologFlags=Contain the extern step makes the job's lease as
// the job starts on the node.
TEST_F(VmSlurm, OverlappingStepsCountTheJobsGresOnceAndTheJobBoundsThemTogether) {
  ASSERT_EQ(shell("grep -q '^PrologFlags=Contain' /etc/slurm/slurm.conf || "
                  "echo PrologFlags=Contain >> /etc/slurm/slurm.conf; "
                  "systemctl restart slurmctld slurmd"),
            0);
  ASSERT_TRUE(nodeIdle()) << shellOut("sinfo; journalctl --no-pager -u slurmd | tail -20");
  std::string idFile = kDir + "/o.job";
  std::string ready1 = kDir + "/o1.ready", ready2 = kDir + "/o2.ready";
  std::string release = kDir + "/o.release";
  // Two steps of 256 MiB at once, then a third that asks for 512 MiB while
  // they hold theirs: 1 GiB > 768 MiB, refused in the kernel by the job's bound.
  auto r = runProgram({"sbatch", "--wait", "--gres=tallymem:768M", "--chdir=" + kDir,
                       "--output=" + kDir + "/o.out", "--wrap",
                       "echo $SLURM_JOB_ID > " + idFile + "; srun --overlap " + kWorkload +
                           " gpu gtt 256 1 60000 " + ready1 + " " + release + " & srun --overlap " +
                           kWorkload + " gpu gtt 256 1 60000 " + ready2 + " " + release +
                           " & while [ ! -e " + ready1 + " ] || [ ! -e " + ready2 +
                           " ]; do sleep 0.2; done; srun --overlap " + kWorkload +
                           " gpu gtt 512 1 100; echo third=$?; touch " + release + "; wait"});
  std::string out = readFile(kDir + "/o.out");
  EXPECT_EQ(r.exitCode(), 0) << r.out << r.err << out;
  std::string job = jobIdFrom(idFile);
  ASSERT_FALSE(job.empty()) << out;
  EXPECT_NE(out.find("third=1"), std::string::npos) << out;
  EXPECT_NE(out.find("create: Cannot allocate memory"), std::string::npos) << out;
  json jobRows = rowsNamed("slurm-" + job);
  ASSERT_FALSE(jobRows.empty());
  std::string jobLease = jobRows[0].value("lease", "");
  // The extern step made it: granted before any step's lease.
  json s0 = rowsNamed("slurm-" + job + ".0"), s1 = rowsNamed("slurm-" + job + ".1");
  ASSERT_FALSE(s0.empty());
  ASSERT_FALSE(s1.empty());
  EXPECT_LT(jobRows[0]["seq"].get<std::int64_t>(), s0[0]["seq"].get<std::int64_t>());
  for (const json* rows : {&s0, &s1}) {
    EXPECT_EQ((*rows)[0]["body"]["parent"], jobLease);
    json end = terminal(*rows);
    ASSERT_TRUE(end.is_object());
    EXPECT_EQ(end["body"]["outcome"]["exit_code"], 0) << end.dump(2);
    EXPECT_EQ(end["body"]["gpu"]["peak_bytes"], 256 * kMiB) << end.dump(2);
  }
  ASSERT_TRUE(eventually([&] { return terminal(rowsNamed("slurm-" + job)).is_object(); }, 30s));
  json jobEnd = terminal(rowsNamed("slurm-" + job));
  // Both steps' 256 MiB at once (and any page the driver made beside them),
  // never past the job's 768 MiB.
  auto peak = jobEnd["body"]["gpu"]["kernel_charge"]["peak_bytes"].get<std::uint64_t>();
  EXPECT_GE(peak, 512 * kMiB) << jobEnd.dump(2);
  EXPECT_LE(peak, 768 * kMiB) << jobEnd.dump(2);
  EXPECT_GE(jobEnd["body"]["gpu"]["kernel_charge"]["allocations_refused"].get<std::uint64_t>(), 1u)
      << jobEnd.dump(2);
  // As each step's tasks end, the node's line goes into the job's
  // AdminComment (what `sacct -o AdminComment` shows with accounting): the
  // job's peak through its last step, before the job could finish.
  std::string node = shellOut("hostname -s");
  std::string comment = shellOut("scontrol show job " + job + " | grep -o 'AdminComment=.*'");
  expectPagesQuote({"docs/slurm.md"}, "tests/vm/slurm_jobs_test.cpp#overlapping", comment + "\n");
  EXPECT_EQ(comment.rfind("AdminComment=tally " + node + ": GPU peak ", 0), 0u) << comment;
  EXPECT_NE(comment.find(" of 768.0 MiB; "), std::string::npos) << comment;
  EXPECT_NE(comment.find("refused in the kernel ("), std::string::npos) << comment;
  EXPECT_EQ(comment.find("unknown"), std::string::npos) << "the peak was metered: " << comment;
  ASSERT_EQ(shell("sed -i '/^PrologFlags=Contain/d' /etc/slurm/slurm.conf; "
                  "systemctl restart slurmctld slurmd"),
            0);
  ASSERT_TRUE(nodeIdle());
}

// With PrologFlags=Contain the extern step's user part (where
// pam_slurm_adopt puts ssh sessions) is a child lease of the job's: with
// Slurm's sleep in it (22.05, 24.11), or kept while empty (26.05 runs none).
// Two processes with buffers made outside any lease are moved in, one into
// the running step, one into the extern user part's task_special as
// pam_slurm_adopt would (cgroup_v2.c cgroup_p_step_addto):
// each child stays under the job's 32 MiB, the job is over it, so the job's
// bound kills, and it kills only its children's cgroups, never the job's own
// with slurmstepd in it. The batch step's stderr (printed by its
// slurmstepd, alive) and the job's AdminComment say so; the extern
// slurmstepd still runs its plugin's end (the job's record on the node is
// removed).
TEST_F(VmSlurm, AKillAtTheJobsBoundTakesOnlyUserSubtreesAndIsSaidOnTheStep) {
  ASSERT_EQ(shell("grep -q '^PrologFlags=Contain' /etc/slurm/slurm.conf || "
                  "echo PrologFlags=Contain >> /etc/slurm/slurm.conf; "
                  "systemctl restart slurmctld slurmd"),
            0);
  struct NoContain {
    ~NoContain() {
      shell(
          "sed -i '/^PrologFlags=Contain/d' /etc/slurm/slurm.conf; "
          "systemctl restart slurmctld slurmd");
      nodeIdle();
    }
  } restore;
  ASSERT_TRUE(nodeIdle()) << shellOut("sinfo; journalctl --no-pager -u slurmd | tail -20");
  std::string idFile = kDir + "/k.job", ready = kDir + "/k.ready", out = kDir + "/k.out";
  auto sb = spawnProgram(
      {"sbatch", "--wait", "--gres=tallymem:32M", "--chdir=" + kDir, "--output=" + out, "--wrap",
       "echo $SLURM_JOB_ID > " + idFile + "; srun " + kWorkload + " gpu gtt 1 1 120000 " + ready});
  struct Cancel {
    std::string idFile;
    ~Cancel() { shell("scancel $(cat " + idFile + ") 2>/dev/null"); }
  } cancel{idFile};
  ASSERT_TRUE(eventually([&] { return ::access(ready.c_str(), F_OK) == 0; }, 90s))
      << readFile(out) << readFile(sb.errPath);
  std::string job = jobIdFrom(idFile);
  json jobRows = rowsNamed("slurm-" + job);
  ASSERT_FALSE(jobRows.empty());
  std::string jobLease = jobRows[0].value("lease", "");
  std::string jobCg = jobRows[0]["body"]["target"].value("cgroup", "");
  // Slurm 22.05 and 24.11 run the extern step's sleep in its user part from
  // the start; 26.05 runs none there (mgr.c _spawn_job_container), so its
  // lease is asked kept while empty, and slurmd's log says so.
  const bool externSleeps = kRelease < "26";
  json ext = rowsNamed("slurm-" + job + ".extern");
  std::string journal =
      shellOut("journalctl --no-pager -o cat | grep -a 'tally: job " + job + "' | tail -8");
  ASSERT_FALSE(ext.empty()) << "the extern step's user part is no lease: " << journal;
  EXPECT_EQ(ext[0]["body"]["parent"], jobLease);
  EXPECT_EQ(ext[0]["body"]["target"]["cgroup"], jobCg + "/step_extern/user");
  EXPECT_EQ(ext[0]["body"]["declared"]["gpu_memory_max"], 32 * kMiB);
  EXPECT_EQ(ext[0]["body"].value("keep_when_empty", false), !externSleeps) << ext[0].dump();
  if (!externSleeps) {
    EXPECT_NE(journal.find("(empty until pam_slurm_adopt puts a process there: kept until the "
                           "job ends)"),
              std::string::npos)
        << journal;
  }

  // Made outside any lease (only fdinfo sees them), then moved in.
  std::string r1 = kDir + "/k1.ready", r2 = kDir + "/k2.ready";
  auto a1 = spawnProgram({kWorkload, "gpu", "gtt", "24", "1", "120000", r1});
  auto a2 = spawnProgram({kWorkload, "gpu", "gtt", "24", "1", "120000", r2});
  ASSERT_TRUE(eventually(
      [&] { return ::access(r1.c_str(), F_OK) == 0 && ::access(r2.c_str(), F_OK) == 0; }, 30s));
  std::string extern_slurmstepd =
      readFile("/sys/fs/cgroup" + jobCg + "/step_extern/slurm/cgroup.procs");
  ASSERT_FALSE(extern_slurmstepd.empty()) << "no extern slurmstepd: is Contain on?";
  writeFile("/sys/fs/cgroup" + jobCg + "/step_0/user/task_0/cgroup.procs",
            std::to_string(a1.pid) + "\n");
  // Slurm makes task_special as it adopts the first process (26.05: not before).
  std::string special = "/sys/fs/cgroup" + jobCg + "/step_extern/user/task_special";
  ASSERT_TRUE(::mkdir(special.c_str(), 0755) == 0 || errno == EEXIST) << special;
  writeFile(special + "/cgroup.procs", std::to_string(a2.pid) + "\n");
  auto killRow = [&] {
    for (const auto& row : rowsNamed("slurm-" + job))
      if (row["kind"] == "gpu-bound" && row["body"]["kind"] == "gpu-memory-kill") return row;
    return json();
  };
  ASSERT_TRUE(eventually([&] { return killRow().is_object(); }, 30s))
      << rowsNamed("slurm-" + job).dump(2);
  for (const Spawned* a : {&a1, &a2}) {
    auto r = waitProgram(*a);
    EXPECT_TRUE(WIFSIGNALED(r.waitStatus) && WTERMSIG(r.waitStatus) == SIGKILL) << r.waitStatus;
  }
  auto done = waitProgram(sb);
  // The batch script is a child too (its step_batch/user): killed with srun
  // in it, so step 0's line has no srun to print it, and the batch step's
  // slurmstepd says it in the job's output file.
  std::string said = readFile(out);
  expectPagesQuote({"docs/slurm.md"}, "tests/vm/slurm_jobs_test.cpp#killed-with-its-job", said);
  EXPECT_NE(said.find("tally: StepId=" + job + ".batch killed with its job: the job's GPU memory "),
            std::string::npos)
      << said;
  EXPECT_NE(said.find(" over its gpu_memory_max 32.0 MiB on this node"), std::string::npos) << said;
  // No child was over on its own: the job's kill is the only one.
  for (const auto& name :
       {"slurm-" + job + ".0", "slurm-" + job + ".extern", "slurm-" + job + ".batch"})
    for (const auto& row : rowsNamed(name))
      EXPECT_FALSE(row["kind"] == "gpu-bound" && row["body"]["kind"] == "gpu-memory-kill")
          << name << ": " << row.dump();
  std::string comment = shellOut("scontrol show job " + job + " | grep -o 'AdminComment=.*'");
  EXPECT_NE(comment.find("its steps killed at "), std::string::npos) << comment;
  // The extern slurmstepd ran its plugin's end: the job's record on the node went with it.
  EXPECT_TRUE(
      eventually([&] { return ::access(("/run/tally-slurm/job_" + job).c_str(), F_OK) != 0; }, 30s))
      << "the extern slurmstepd never ended its step: killed? "
      << shellOut("journalctl --no-pager -o cat | grep -a 'extern' | tail -5");
  std::printf("[ sbatch ] exit %d\n", done.exitCode());
}

// scancel ends the job's steps: the step's row says how (its tasks'
// signal, as slurmstepd reaped them), and the job's lease ends with the job.
TEST_F(VmSlurm, ACancelledJobsLeasesEndWithTheSignalInTheLedger) {
  std::string ready = kDir + "/s.ready", idFile = kDir + "/s.job";
  auto srun = spawnProgram({"srun", "--gres=tallymem:64M", "sh", "-c",
                            "echo $SLURM_JOB_ID > " + idFile + "; exec " + kWorkload +
                                " gpu gtt 32 1 600000 " + ready + " " + kDir + "/s.never"});
  ASSERT_TRUE(eventually([&] { return ::access(ready.c_str(), F_OK) == 0; }, 60s))
      << readFile(srun.errPath);
  std::string job = jobIdFrom(idFile);
  ASSERT_EQ(shell("scancel " + job), 0);
  (void)waitProgram(srun);
  ASSERT_TRUE(eventually([&] { return terminal(rowsNamed("slurm-" + job)).is_object(); }, 60s));
  json step = terminal(rowsNamed("slurm-" + job + ".0"));
  ASSERT_TRUE(step.is_object());
  EXPECT_TRUE(step["body"]["outcome"].contains("signal")) << step.dump(2);
  EXPECT_EQ(step["body"]["gpu"]["peak_bytes"], 32 * kMiB) << step.dump(2);
}

// The daemon dies while a step's attach waits on it (frozen, the plugin's
// call queued; then kill -9 and a new daemon): the step is refused, never run
// unbounded, and no lease of it stays open in the new daemon.
TEST_F(VmSlurm, ADaemonRestartedDuringTheAttachRefusesTheStep) {
  ASSERT_EQ(shell("systemctl kill -s STOP " + kDaemonUnit), 0);
  std::string marker = kDir + "/ra.marker", idFile = kDir + "/ra.job";
  auto srun = spawnProgram({"srun", "--gres=tallymem:64M", "sh", "-c",
                            "echo $SLURM_JOB_ID > " + idFile + "; touch " + marker});
  // The step's call is queued at the frozen daemon.
  ASSERT_TRUE(eventually([&] { return acceptQueue() >= 1; }, 60s))
      << shellOut("cat /proc/net/unix") << readFile(srun.errPath);
  restartDaemonHard();
  auto r = waitProgram(srun);
  std::printf("[ srun ]\n%s%s[ end ]\n", r.out.c_str(), r.err.c_str());
  EXPECT_NE(r.exitCode(), 0);
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the step ran without its bound";
  EXPECT_NE(r.err.find("the step does not start"), std::string::npos) << r.err;
  std::string leases = tally({"leases"}).out;
  EXPECT_EQ(leases.find("slurm-"), std::string::npos) << "nothing of it stays open\n" << leases;
}

// The daemon dies while the plugin waits at the step's end for the outcome
// (frozen as the task exits, the plugin's call queued; then kill -9 and a new
// daemon): the new daemon re-adopts the step's emptied cgroup and waits for
// the tasks' exit status, which the plugin sends again; the outcome has it
// and the cgroup's own memory.peak, and srun ends within end_wait.
TEST_F(VmSlurm, ADaemonRestartedDuringTheEndWaitStillRecordsTheStepsOutcome) {
  std::string ready = kDir + "/re.ready", release = kDir + "/re.release", idFile = kDir + "/re.job";
  auto srun = spawnProgram({"srun", "--gres=tallymem:64M", "sh", "-c",
                            "echo $SLURM_JOB_ID > " + idFile + "; " + kWorkload +
                                " gpu gtt 32 1 60000 " + ready + " " + release + "; exit 3"});
  ASSERT_TRUE(eventually([&] { return ::access(ready.c_str(), F_OK) == 0; }, 60s))
      << readFile(srun.errPath);
  std::string job = jobIdFrom(idFile);
  ASSERT_EQ(shell("systemctl kill -s STOP " + kDaemonUnit), 0);
  writeFile(release, "");
  // The task exited and the plugin's end-of-step call is queued at the frozen daemon.
  ASSERT_TRUE(eventually([&] { return acceptQueue() >= 1; }, 60s))
      << shellOut("cat /proc/net/unix");
  restartDaemonHard();
  auto r = waitProgram(srun);
  std::printf("[ srun ]\n%s%s[ end ]\n", r.out.c_str(), r.err.c_str());
  EXPECT_EQ(r.exitCode(), 3) << r.err;
  json rows = rowsNamed("slurm-" + job + ".0");
  json end = terminal(rows);
  ASSERT_TRUE(end.is_object()) << rows.dump(2);
  EXPECT_EQ(end["kind"], "outcome") << end.dump(2);
  EXPECT_EQ(end["body"]["outcome"]["exit_code"], 3) << "sent again to the new daemon\n"
                                                    << end.dump(2);
  EXPECT_EQ(end["body"]["daemon"]["readopted_after_restart"], true) << end.dump(2);
  EXPECT_TRUE(end["body"]["memory"].contains("peak_bytes")) << end.dump(2);
  std::printf("[ the step's rows ]\n");
  for (const auto& row : rows) std::printf("%s\n", row.value("kind", "").c_str());
  std::printf("[ end ]\n");
}

// With slurmctld frozen after srun made the step (srun's --prolog runs
// between the step's creation and its launch), a step that declares nothing
// runs: its job's record on the node (the batch step asked once) says the
// job holds no GRES here, and the plugin asks the controller nothing.
TEST_F(VmSlurm, AStepThatDeclaresNothingRunsWhileSlurmctldIsFrozen) {
  std::string marker = kDir + "/cf.marker", freeze = kDir + "/cf-freeze.sh";
  writeFile(freeze, "#!/bin/sh\npkill -STOP -x slurmctld\n");
  ASSERT_EQ(::chmod(freeze.c_str(), 0755), 0);
  struct Thaw {
    ~Thaw() { shell("pkill -CONT -x slurmctld"); }
  } thaw;
  auto job = spawnProgram(
      {"sbatch", "--wait", "--chdir=" + kDir, "--output=" + kDir + "/cf.out", "--wrap",
       "srun true && srun --prolog=" + freeze + " " + kWorkload + " marker " + marker});
  ASSERT_TRUE(eventually([&] { return ::access(marker.c_str(), F_OK) == 0; }, 90s))
      << readFile(kDir + "/cf.out") << readFile(job.errPath);
  EXPECT_EQ(shellOut("ps -o stat= -C slurmctld").substr(0, 1), "T")
      << "the step ran while the controller was frozen";
  shell("pkill -CONT -x slurmctld");
  auto r = waitProgram(job);
  EXPECT_EQ(r.exitCode(), 0) << r.err << readFile(kDir + "/cf.out");
  EXPECT_EQ(readFile(kDir + "/cf.out").find("tally"), std::string::npos)
      << readFile(kDir + "/cf.out");
}

// A time limit ends the job: Slurm signals the step's tasks, and the step's
// row has the signal they died of; the job's lease ends with the job, and
// Slurm's record says TIMEOUT (KillWait=2 in vm/slurm-node.sh).
TEST_F(VmSlurm, ATimeLimitEndsTheJobsLeasesWithTheSignalInTheLedger) {
  std::string idFile = kDir + "/tl.job", ready = kDir + "/tl.ready";
  auto r = runProgram({"sbatch", "--wait", "--time=1", "--gres=tallymem:64M", "--chdir=" + kDir,
                       "--output=" + kDir + "/tl.out", "--wrap",
                       "echo $SLURM_JOB_ID > " + idFile + "; srun " + kWorkload +
                           " gpu gtt 32 1 600000 " + ready + " " + kDir + "/tl.never"});
  std::string job = jobIdFrom(idFile);
  ASSERT_FALSE(job.empty()) << readFile(kDir + "/tl.out");
  // sbatch --wait can return while slurmctld still has the job COMPLETING,
  // and then with 0 (CI, 22.05 under load, 2026-12-07): Slurm's final record
  // is what says the time ran out.
  std::string state;
  EXPECT_TRUE(eventually(
      [&] {
        state = shellOut("scontrol show job " + job + " | grep -o 'JobState=[A-Z_]*'");
        return state != "JobState=COMPLETING";
      },
      60s));
  EXPECT_EQ(state, "JobState=TIMEOUT") << "sbatch --wait exited " << r.exitCode();
  ASSERT_TRUE(eventually([&] { return terminal(rowsNamed("slurm-" + job)).is_object(); }, 60s));
  json step = terminal(rowsNamed("slurm-" + job + ".0"));
  ASSERT_TRUE(step.is_object());
  EXPECT_EQ(step["kind"], "outcome") << step.dump(2);
  ASSERT_TRUE(step["body"]["outcome"].contains("signal")) << step.dump(2);
  int signal = step["body"]["outcome"]["signal"].get<int>();
  EXPECT_TRUE(signal == SIGTERM || signal == SIGKILL) << step.dump(2);
  EXPECT_EQ(step["body"]["gpu"]["peak_bytes"], 32 * kMiB) << step.dump(2);
  EXPECT_TRUE(terminal(rowsNamed("slurm-" + job + ".batch")).is_object()) << "the batch step's too";
  std::printf("[ tally ledger --last 3 ]\n%s[ end ]\n",
              tally({"ledger", "--config", kConfig, "--last", "3"}).out.c_str());
}

// --export=NONE keeps the step's environment from it: the repeated
// --tally-attr values that travel there are lost and only the last one SPANK
// forwards itself arrives (docs/slurm.md says so); the slurm_* ids never
// depend on the environment.
TEST_F(VmSlurm, UnderExportNoneOnlyTheLastAttributeArrives) {
  std::string idFile = kDir + "/x.job";
  auto r =
      runProgram({"srun", "--export=NONE", "--gres=tallymem:64M", "--tally-attr=team=ml",
                  "--tally-attr=model=llama", "/bin/sh", "-c", "echo $SLURM_JOB_ID > " + idFile});
  ASSERT_EQ(r.exitCode(), 0) << r.err;
  json rows = rowsNamed("slurm-" + jobIdFrom(idFile) + ".0");
  ASSERT_FALSE(rows.empty());
  const json& attrs = rows[0]["body"]["declared"]["attributes"];
  EXPECT_EQ(attrs.value("model", ""), "llama") << attrs;
  EXPECT_FALSE(attrs.contains("team")) << attrs;
  EXPECT_EQ(attrs.value("slurm_job_id", ""), jobIdFrom(idFile)) << attrs;
}

}  // namespace
}  // namespace tally
