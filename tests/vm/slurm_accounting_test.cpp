// What docs/slurm.md ("What accounting can sum") tells a site to add for
// sacct, billing and a QOS limit on the GRES, run against a real slurmdbd:
// MariaDB and slurmdbd from the release's own Debian root (vm/debian-slurm.sh
// installs them), started for this test and stopped after it. Debian 12's
// 22.05 runs from the host's tree, which has neither: there it is skipped;
// scripts/test.sh runs it on its 24.11 and 26.05 lines.
#include "slurm_fixture.h"

namespace tally {
namespace {

using namespace tally::vmslurm;

TEST_F(VmSlurm, AccountingSumsBillsAndLimitsTheGresWithTheDocumentedLines) {
  const char* rootEnv = std::getenv("TALLY_SLURM_ROOT");
  if (kRelease == "22.05" || !rootEnv)
    GTEST_SKIP() << "slurmdbd and MariaDB come in the release roots (vm/debian-slurm.sh): the "
                    "24.11 and 26.05 lines run this";
  const std::string root = rootEnv, node = shellOut("hostname -s"), db = kDir + "/mysql";
  ASSERT_EQ(::access((root + "/usr/sbin/slurmdbd").c_str(), X_OK), 0)
      << "the root predates the accounting test: run vm/debian-slurm.sh again";
  const std::string slurmConf = readFile("/etc/slurm/slurm.conf");
  struct Restore {
    std::string slurmConf;
    ~Restore() {
      writeFile("/etc/slurm/slurm.conf", slurmConf);
      shell(
          "scancel -u root; systemctl restart slurmctld slurmd; "
          "systemctl stop tally-test-slurmdbd tally-test-mariadb 2>/dev/null; "
          "systemctl reset-failed tally-test-slurmdbd tally-test-mariadb 2>/dev/null; "
          "rm -rf /etc/slurm/slurmdbd.conf " +
          kDir + "/mysql");
      nodeIdle();
    }
  } restore{slurmConf};
  auto inRoot = [&](const std::string& script) {
    writeFile(kDir + "/in-root.sh", "set -e\n" + script);
    return runProgram({"chroot", root, "sh", kDir + "/in-root.sh"});
  };

  // Whether `command` in the root succeeds within 120 s (a daemon started as
  // `unit` answers); if not, its last words and the unit's journal say why.
  auto answers = [&](const std::string& command, const std::string& unit) {
    ProgramResult last;
    if (eventually([&] { return (last = inRoot(command + "\n")).exitCode() == 0; }, 120s))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << command << ": " << last.out << last.err
           << shellOut("journalctl --no-pager -u " + unit + " | tail -n 20");
  };

  // A database for slurmdbd, on the guest's tmpfs. slurm_acct_db is made here:
  // slurmdbd's own first connection (made to create it, then reused) fails
  // its first query with MariaDB 11.8's client library ("mysql_query failed:
  // 5027 Number of columns in result (=1) set execeeds maxmimum allowed
  // number of columns (=0)", 24.11 and 26.05, 2026-12-07).
  // mariadbd's own defaults for its socket and pid file: /run/mysqld
  // (trixie) or /run/mariadbd (sid), what that root's client library asks.
  auto made =
      inRoot("rm -rf " + db + "; mkdir -p " + db + " /run/mysqld /run/mariadbd\n" +
             "chown mysql:mysql " + db + " /run/mysqld /run/mariadbd\n" +
             "mariadb-install-db --user=mysql --datadir=" + db + " --skip-test-db >/dev/null\n");
  ASSERT_EQ(made.exitCode(), 0) << made.out << made.err;
  ASSERT_EQ(shell("systemd-run --quiet --unit=tally-test-mariadb chroot " + root +
                  " /usr/sbin/mariadbd --user=mysql --datadir=" + db +
                  " --skip-networking --innodb-snapshot-isolation=OFF"),
            0);
  ASSERT_TRUE(answers("mariadb -uroot -e 'select 1'", "tally-test-mariadb"));
  auto user = inRoot(
      "mariadb -uroot -e \"CREATE USER slurm@localhost IDENTIFIED BY 'tally'; "
      "GRANT ALL ON slurm_acct_db.* TO slurm@localhost; CREATE DATABASE slurm_acct_db\"\n");
  ASSERT_EQ(user.exitCode(), 0) << user.out << user.err;
  writeFile("/etc/slurm/slurmdbd.conf",
            "AuthType=auth/munge\nDbdHost=" + node +
                "\nSlurmUser=slurm\nStorageType=accounting_storage/mysql\n"
                "StorageHost=localhost\nStorageUser=slurm\nStoragePass=tally\n"
                "StorageLoc=slurm_acct_db\nPidFile=/run/slurmdbd.pid\n");
  // Owned by the root's slurm user: slurmdbd checks it by that root's passwd.
  ASSERT_EQ(inRoot("chown slurm /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf\n")
                .exitCode(),
            0);
  ASSERT_EQ(shell("systemd-run --quiet --unit=tally-test-slurmdbd chroot " + root +
                  " /usr/sbin/slurmdbd -D"),
            0);
  // docs/slurm.md's lines: the TRES, and its billing weight on the partition
  // (2 per GiB here, so that half a GiB bills one CPU's worth).
  std::string conf = slurmConf;
  std::string partition = "PartitionName=gpu ";
  auto at = conf.find(partition);
  ASSERT_NE(at, std::string::npos) << conf;
  auto eol = conf.find('\n', at);
  conf.insert(eol, " TRESBillingWeights=\"CPU=1.0,GRES/tallymem=2.0G\"");
  conf += "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=" + node +
          "\nAccountingStorageEnforce=associations,limits,qos\n"
          "AccountingStorageTRES=gres/tallymem\n";
  writeFile("/etc/slurm/slurm.conf", conf);
  // sacctmgr finds slurmdbd through them; slurmctld reads them once the
  // cluster is there.
  ASSERT_TRUE(answers("sacctmgr -n show cluster", "tally-test-slurmdbd"));
  // The cluster and an account for root; then docs/slurm.md's QOS limit (here
  // at half the VM's 1 GiB GRES).
  auto assoc = inRoot(
      "sacctmgr -i add cluster tally >/dev/null\n"
      "sacctmgr -i add account lab >/dev/null\n"
      "sacctmgr -i add user root account=lab >/dev/null\n");
  ASSERT_EQ(assoc.exitCode(), 0) << assoc.out << assoc.err;
  // slurmctld registers gres/tallymem as a TRES with slurmdbd as it starts;
  // only then can a QOS name it. (The cluster id slurmctld keeps from its
  // runs without slurmdbd is not the one slurmdbd gave: it would refuse to
  // start, "CLUSTER ID MISMATCH".)
  ASSERT_EQ(shell("rm -f " + root +
                  "/var/spool/slurmctld/clustername; "
                  "systemctl restart slurmctld slurmd"),
            0);
  ASSERT_TRUE(nodeIdle()) << shellOut(
      "sinfo -N -l; systemctl is-active slurmctld slurmd; "
      "journalctl --no-pager -u slurmctld -u slurmd -u tally-test-slurmdbd | tail -n 40");
  auto limit = inRoot("sacctmgr -i modify qos normal set MaxTRESPerUser=gres/tallymem=512M\n");
  ASSERT_EQ(limit.exitCode(), 0) << limit.out << limit.err;
  // slurmctld reads the QOS from slurmdbd as it starts: one more start, so
  // that the next job meets the limit. (scontrol's view of the QOS shows a
  // per-user limit only under a user who has run under it: nothing to wait on.)
  ASSERT_EQ(shell("systemctl restart slurmctld"), 0);
  ASSERT_TRUE(nodeIdle()) << shellOut("journalctl --no-pager -u slurmctld | tail -n 20");

  // Within the QOS: the job runs, is billed for its GRES beside its CPU, and
  // sacct shows what Slurm placed.
  auto within = runProgram(
      {"timeout", "120", "srun", "-c1", "--gres=tallymem:512M", "sh", "-c", "echo $SLURM_JOB_ID"});
  ASSERT_EQ(within.exitCode(), 0) << within.out << within.err;
  std::string job = within.out.substr(0, within.out.find('\n'));
  // What Slurm allocated (AllocTRES=, or TRES= on older releases; not ReqTRES=).
  std::string tres = shellOut("scontrol show job " + job + " | grep -oE '(^| )(Alloc)?TRES=[^ ]*'");
  EXPECT_NE(tres.find("gres/tallymem="), std::string::npos) << tres;
  // 1 CPU × 1.0 + 0.5 GiB × 2.0 per GiB
  EXPECT_NE(tres.find("billing=2,"), std::string::npos) << tres;
  std::string alloc;
  EXPECT_TRUE(eventually(
      [&] {
        alloc = shellOut("sacct -n -X -j " + job + " -o AllocTRES%80");
        return alloc.find("billing=2,") != std::string::npos &&
               alloc.find("gres/tallymem=536870912,") != std::string::npos;  // bytes
      },
      60s))
      << alloc << shellOut("journalctl --no-pager -u tally-test-slurmdbd | tail -n 10");

  // The node's AdminComment line (the fixture loads the plugin with
  // admin_comment=on) reaches accounting with the job.
  std::string comment;
  EXPECT_TRUE(eventually(
      [&] {
        comment = shellOut("sacct -n -X -j " + job + " -o AdminComment%200");
        return comment.find("tally " + node + ": GPU peak ") != std::string::npos;
      },
      60s))
      << comment;

  // Over the QOS limit: Slurm holds the job.
  auto over = runProgram({"sbatch", "--parsable", "--gres=tallymem:768M", "--wrap", "true"});
  ASSERT_EQ(over.exitCode(), 0) << over.out << over.err;
  std::string held = over.out.substr(0, over.out.find('\n'));
  std::string reason;
  EXPECT_TRUE(eventually(
      [&] {
        reason = shellOut("squeue -h -j " + held + " -o '%T %r'");
        return reason.starts_with("PENDING QOSMax");
      },
      60s))
      << reason;
}

}  // namespace
}  // namespace tally
