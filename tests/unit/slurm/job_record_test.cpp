#include "slurm/job_record.h"

#include <gtest/gtest.h>

namespace tally::slurm {
namespace {

TEST(JobRecord, IsOneLineNamingTheJobItsRunHereAndItsGres) {
  EXPECT_EQ(encodeJobRecord({.job = 4242,
                             .cgroupId = 8812,
                             .asked = {"tallymem"},
                             .gres = GresFound{"tallymem", 67108864}}),
            "tally-slurm-job 2 job=4242 cgroup=8812 asked=tallymem gres=tallymem:67108864\n");
  EXPECT_EQ(encodeJobRecord({.job = 4243, .cgroupId = 8840, .asked = {"tallymem", "gpumem"}}),
            "tally-slurm-job 2 job=4243 cgroup=8840 asked=tallymem,gpumem gres=none\n");
  EXPECT_EQ(encodeJobRecord(
                {.job = 4245, .cgroupId = 9001, .asked = {"tallymem"}, .het = HetJob{4244, 1}}),
            "tally-slurm-job 2 job=4245 cgroup=9001 asked=tallymem gres=none het=4244+1\n");
  // slurmctld's account and partition, and the job's lease here once granted:
  // its later steps nest in it directly.
  EXPECT_EQ(encodeJobRecord({.job = 4246,
                             .cgroupId = 9120,
                             .asked = {"tallymem"},
                             .gres = GresFound{"tallymem", 67108864},
                             .account = "physics",
                             .partition = "gpu",
                             .jobLease = "ed6397fc3ad5"}),
            "tally-slurm-job 2 job=4246 cgroup=9120 asked=tallymem gres=tallymem:67108864 "
            "account=physics partition=gpu lease=ed6397fc3ad5\n");
  EXPECT_EQ(encodeJobRecord({.job = 4245,
                             .cgroupId = 1,
                             .asked = {"tallymem"},
                             .het = HetJob{4244, 1},
                             .jobLease = "a1"}),
            "tally-slurm-job 2 job=4245 cgroup=1 asked=tallymem gres=none het=4244+1 lease=a1\n");
  // A name that is not one word is not kept (the attribute is then absent).
  EXPECT_EQ(encodeJobRecord(
                {.job = 5, .cgroupId = 2, .asked = {"t"}, .account = "a b", .partition = "p\x01"}),
            "tally-slurm-job 2 job=5 cgroup=2 asked=t gres=none\n");
}

TEST(JobRecord, ReadsBackWhatItWrote) {
  for (const JobRecord& r : {JobRecord{.job = 1, .cgroupId = 1, .asked = {"tallymem"}},
                             JobRecord{.job = 4294967295u,
                             .cgroupId = 18446744073709551615ull,
                             .asked = {"tallymem"},
                             .gres = GresFound{"tallymem", 0},
                             .jobLease = "0"},
                             JobRecord{.job = 7,
                             .cgroupId = 77,
                             .asked = {"a", "b", "gpu-mem.v2", "d"},
                             .gres = GresFound{"gpu-mem.v2", 18446744073709551615ull},
                             .account = std::string(64, '~'),
                             .jobLease = std::string(64, 'f')},
                             JobRecord{.job = 4244,
                             .cgroupId = 3,
                             .asked = {"tallymem"},
                             .gres = GresFound{"tallymem", 64},
                             .het = HetJob{4244, 0},
                             .partition = "gpu=x",
                             .jobLease = "Lease_id-9"},
                             JobRecord{.job = 9,
                             .cgroupId = 9,
                             .asked = {"tallymem"},
                             .het = HetJob{4294967295u, 4294967295u},
                             .account = "acct",
                             .partition = "part"}}) {
    auto back = decodeJobRecord(encodeJobRecord(r));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->job, r.job);
    EXPECT_EQ(back->cgroupId, r.cgroupId);
    EXPECT_EQ(back->asked, r.asked);
    ASSERT_EQ(back->gres.has_value(), r.gres.has_value());
    if (r.gres) {
      EXPECT_EQ(back->gres->name, r.gres->name);
      EXPECT_EQ(back->gres->count, r.gres->count);
    }
    ASSERT_EQ(back->het.has_value(), r.het.has_value());
    if (r.het) {
      EXPECT_EQ(back->het->leader, r.het->leader);
      EXPECT_EQ(back->het->offset, r.het->offset);
    }
    EXPECT_EQ(back->account, r.account);
    EXPECT_EQ(back->partition, r.partition);
    EXPECT_EQ(back->jobLease, r.jobLease);
  }
}

// Anything but a whole record is refused, never read as "no GRES": the
// plugin then asks slurmctld.
TEST(JobRecord, RefusesAnythingElse) {
  const std::string tooLong =
      "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=" + std::string(65, 'a') +
      "\n";
  EXPECT_FALSE(decodeJobRecord(tooLong));
  // asked= is a comma list: a name with a comma would read back as two.
  EXPECT_FALSE(validGresName("a,b"));
  for (std::string_view text : {
           "",
           "tally-slurm-job 2 job=4242 cgroup=7 asked=tallymem gres=none",  // cut short
           "tally-slurm-job 1 job=4242 asked=tallymem gres=none\n",         // another version
           "tally-slurm-job 2 job=4242 cgroup=7 asked=tallymem gres=none\nmore\n",
           "tally-slurm-job 2 job=4242 cgroup=7 asked=tallymem gres=none \n",
           "tally-slurm-job 2 job=0 cgroup=7 asked=tallymem gres=none\n",  // not a job id
           "tally-slurm-job 2 job=-1 cgroup=7 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=4294967296 cgroup=7 asked=tallymem gres=none\n",  // past 32 bits
           "tally-slurm-job 2 job=+5 cgroup=7 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=05 cgroup=7 asked=tallymem gres=none\n",  // one spelling per
                                                                            // value
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=tallymem:064\n",
           "tally-slurm-job 2 job=5 cgroup=7 gres=none\n",  // asked= missing
           "tally-slurm-job 2 job=5 cgroup=7 asked= gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=a,,b gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=a,b,c,d,e gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem\n",  // gres= missing
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=tallymem\n",      // no count
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=tallymem:64M\n",  // bytes, as
                                                                                   // encode writes
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=tallymem:18446744073709551616\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=gpumem:64\n",  // not one it asked
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=:64\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=a/b:64\n",
           "tally-slurm-job 2 cgroup=7 asked=tallymem job=5 gres=none\n",  // out of order
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=0+1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+01\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+1 \n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+1 x=1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none hat=4+1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=\n",  // no id
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a b\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a/b\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a=b\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a+1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a lease=b\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a het=4+1\n",  // out of
                                                                                           // order
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+1 lease=a x=1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=\xff\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem  gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=7 het=4+1 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=5 asked=tallymem gres=none\n",  // cgroup= missing
           "tally-slurm-job 2 job=5 cgroup=0 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=07 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=18446744073709551616 asked=tallymem gres=none\n",
           "tally-slurm-job 2 cgroup=7 job=5 asked=tallymem gres=none\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none account=\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none account=a\xff"
           "b\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none partition=p account=a\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none lease=a account=x\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none account=x account=y\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none account=x het=4+1\n",
           "tally-slurm-job 2 job=5 cgroup=7 asked=tallymem gres=none het=4+1 account=a "
           "partition=p lease=l x=1\n",
       }) {
    auto r = decodeJobRecord(text);
    EXPECT_FALSE(r) << text;
    if (!r) {
      EXPECT_NE(r.error().message.find("malformed"), std::string::npos);
    }
  }
}

TEST(JobRecord, FileNamesCarryTheJobId) {
  EXPECT_EQ(jobRecordName(4242), "job_4242");
  EXPECT_EQ(jobOfRecordName("job_4242"), 4242u);
  EXPECT_EQ(jobOfRecordName("job_0"), std::nullopt);
  EXPECT_EQ(jobOfRecordName("job_4242.tmp"), std::nullopt);
  EXPECT_EQ(jobOfRecordName("job_"), std::nullopt);
  EXPECT_EQ(jobOfRecordName("."), std::nullopt);
  EXPECT_EQ(jobOfRecordName("job_99999999999"), std::nullopt);
}

}  // namespace
}  // namespace tally::slurm
