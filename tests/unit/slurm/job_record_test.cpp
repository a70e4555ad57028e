#include "slurm/job_record.h"

#include <gtest/gtest.h>

namespace tally::slurm {
namespace {

TEST(JobRecord, IsOneLineNamingTheJobAndItsGres) {
  EXPECT_EQ(
      encodeJobRecord({4242, {"tallymem"}, GresFound{"tallymem", 67108864}, std::nullopt, ""}),
      "tally-slurm-job 1 job=4242 asked=tallymem gres=tallymem:67108864\n");
  EXPECT_EQ(encodeJobRecord({4243, {"tallymem", "gpumem"}, std::nullopt, std::nullopt, ""}),
            "tally-slurm-job 1 job=4243 asked=tallymem,gpumem gres=none\n");
  EXPECT_EQ(encodeJobRecord({4245, {"tallymem"}, std::nullopt, HetJob{4244, 1}, ""}),
            "tally-slurm-job 1 job=4245 asked=tallymem gres=none het=4244+1\n");
  // The job's lease here, once granted: its later steps nest in it directly.
  EXPECT_EQ(
      encodeJobRecord(
          {4246, {"tallymem"}, GresFound{"tallymem", 67108864}, std::nullopt, "ed6397fc3ad5"}),
      "tally-slurm-job 1 job=4246 asked=tallymem gres=tallymem:67108864 lease=ed6397fc3ad5\n");
  EXPECT_EQ(encodeJobRecord({4245, {"tallymem"}, std::nullopt, HetJob{4244, 1}, "a1"}),
            "tally-slurm-job 1 job=4245 asked=tallymem gres=none het=4244+1 lease=a1\n");
}

TEST(JobRecord, ReadsBackWhatItWrote) {
  for (const JobRecord& r :
       {JobRecord{1, {"tallymem"}, std::nullopt, std::nullopt, ""},
        JobRecord{4294967295u, {"tallymem"}, GresFound{"tallymem", 0}, std::nullopt, "0"},
        JobRecord{7,
                  {"a", "b", "gpu-mem.v2", "d"},
                  GresFound{"gpu-mem.v2", 18446744073709551615ull},
                  std::nullopt,
                  std::string(64, 'f')},
        JobRecord{4244, {"tallymem"}, GresFound{"tallymem", 64}, HetJob{4244, 0}, "Lease_id-9"},
        JobRecord{9, {"tallymem"}, std::nullopt, HetJob{4294967295u, 4294967295u}, ""}}) {
    auto back = decodeJobRecord(encodeJobRecord(r));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->job, r.job);
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
    EXPECT_EQ(back->jobLease, r.jobLease);
  }
}

// Anything but a whole record is refused, never read as "no GRES": the
// plugin then asks slurmctld.
TEST(JobRecord, RefusesAnythingElse) {
  const std::string tooLong =
      "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=" + std::string(65, 'a') + "\n";
  EXPECT_FALSE(decodeJobRecord(tooLong));
  for (std::string_view text : {
           "",
           "tally-slurm-job 1 job=4242 asked=tallymem gres=none",    // cut short
           "tally-slurm-job 2 job=4242 asked=tallymem gres=none\n",  // another version
           "tally-slurm-job 1 job=4242 asked=tallymem gres=none\nmore\n",
           "tally-slurm-job 1 job=4242 asked=tallymem gres=none \n",
           "tally-slurm-job 1 job=0 asked=tallymem gres=none\n",  // not a job id
           "tally-slurm-job 1 job=-1 asked=tallymem gres=none\n",
           "tally-slurm-job 1 job=4294967296 asked=tallymem gres=none\n",  // past 32 bits
           "tally-slurm-job 1 job=+5 asked=tallymem gres=none\n",
           "tally-slurm-job 1 job=05 asked=tallymem gres=none\n",  // one spelling per value
           "tally-slurm-job 1 job=5 asked=tallymem gres=tallymem:064\n",
           "tally-slurm-job 1 job=5 gres=none\n",  // asked= missing
           "tally-slurm-job 1 job=5 asked= gres=none\n",
           "tally-slurm-job 1 job=5 asked=a,,b gres=none\n",
           "tally-slurm-job 1 job=5 asked=a,b,c,d,e gres=none\n",
           "tally-slurm-job 1 job=5 asked=tallymem\n",  // gres= missing
           "tally-slurm-job 1 job=5 asked=tallymem gres=\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=tallymem\n",      // no count
           "tally-slurm-job 1 job=5 asked=tallymem gres=tallymem:64M\n",  // bytes, as encode writes
           "tally-slurm-job 1 job=5 asked=tallymem gres=tallymem:18446744073709551616\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=gpumem:64\n",  // not one it asked
           "tally-slurm-job 1 job=5 asked=tallymem gres=:64\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=a/b:64\n",
           "tally-slurm-job 1 asked=tallymem job=5 gres=none\n",  // out of order
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=0+1\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4+\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4+01\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4+1 \n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4+1 x=1\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none hat=4+1\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=\n",  // no id
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a b\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a/b\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a=b\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a+1\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a lease=b\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=a het=4+1\n",  // out of order
           "tally-slurm-job 1 job=5 asked=tallymem gres=none het=4+1 lease=a x=1\n",
           "tally-slurm-job 1 job=5 asked=tallymem gres=none lease=\xff\n",
           "tally-slurm-job 1 job=5 asked=tallymem  gres=none\n",
           "tally-slurm-job 1 job=5 het=4+1 asked=tallymem gres=none\n",
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
