#include "attribution/container.h"

#include <gtest/gtest.h>

namespace tally::attribution {
namespace {

constexpr const char* kId = "4f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f";

TEST(Container, Podman) {
  auto w = classifyCgroup(std::string("/machine.slice/libpod-") + kId + ".scope/container");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kPodman);
  EXPECT_EQ(w->id, kId);
  EXPECT_EQ(w->name, "podman:4f2a9c1e8b7d");
}

TEST(Container, PodmanConmonIsSplitFromContainer) {
  auto w = classifyCgroup(std::string("/machine.slice/libpod-conmon-") + kId + ".scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kPodmanConmon);
  EXPECT_EQ(w->id, kId);
}

TEST(Container, RootlessPodmanUnderUserManager) {
  auto w = classifyCgroup(
      std::string("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-") + kId +
      ".scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kPodman);
}

TEST(Container, Docker) {
  auto w = classifyCgroup(std::string("/system.slice/docker-") + kId + ".scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kDocker);
  EXPECT_EQ(w->id, kId);
  w = classifyCgroup(std::string("/docker/") + kId);  // cgroupfs driver
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kDocker);
}

TEST(Container, KubernetesSystemdDriver) {
  auto w = classifyCgroup(
      "/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/"
      "cri-containerd-abcdef0123456789.scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kKubernetesPod);
  EXPECT_EQ(w->id, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
  EXPECT_EQ(w->container, "abcdef0123456789");
}

TEST(Container, KubernetesCgroupfsDriver) {
  auto w = classifyCgroup("/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/0123abcd");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kKubernetesPod);
  EXPECT_EQ(w->id, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
  EXPECT_EQ(w->container, "0123abcd");
  w = classifyCgroup("/kubepods/besteffort/podaaaa-bbbb");
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->container.has_value());
}

TEST(Container, SlurmStep) {
  auto w = classifyCgroup("/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kSlurmStep);
  EXPECT_EQ(w->id, "4242");
  EXPECT_EQ(w->step, "0");
  EXPECT_EQ(w->name, "slurm:4242.0");
  w = classifyCgroup("/system.slice/slurmstepd.scope/job_7/step_batch");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->step, "batch");
}

TEST(Container, SystemdUnits) {
  auto w = classifyCgroup("/system.slice/llama-server.service");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::kSystemdUnit);
  EXPECT_EQ(w->id, "llama-server.service");
  w = classifyCgroup("/user.slice/user-1000.slice/user@1000.service/app.slice/run-p123-i456.scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->id, "run-p123-i456.scope");  // the innermost unit
  w = classifyCgroup("/tally.slice/tally-0a1b.slice/tally-0a1b.scope");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->id, "tally-0a1b.scope");
}

TEST(Container, Unrecognised) {
  EXPECT_FALSE(classifyCgroup("/"));
  EXPECT_FALSE(classifyCgroup(""));
  EXPECT_FALSE(classifyCgroup("/user.slice"));
  // "libpod-.scope" names no container, but it is still a valid scope unit.
  EXPECT_EQ(classifyCgroup("/system.slice/libpod-.scope/x")->kind, WorkloadKind::kSystemdUnit);
}

}  // namespace
}  // namespace tally::attribution
