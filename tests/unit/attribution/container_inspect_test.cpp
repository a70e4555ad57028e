#include "attribution/container_inspect.h"

#include <gtest/gtest.h>

#include "attribution/container.h"
#include "support/fake_host.h"

namespace tally::attribution {
namespace {

using testing::readFile;

std::string fixture(const std::string& name) {
  return readFile(std::string(TALLY_FIXTURE_DIR) + "/containers/" + name);
}

// podman 4.3.1 (Debian 12) in the project's VM: `podman container inspect comfyui`.
constexpr const char* kPodmanId =
    "b6d73dc354ad63f3bc8c37851ae49bc4fcaa584ef1bf07ee711f27e59ebac82a";

TEST(ContainerInspect, PodmanAndDockerNameTheirRunningContainer) {
  auto p = decodeContainerInspect(fixture("podman-4.3.1-running.json"), "podman");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->engine, "podman");
  EXPECT_EQ(p->id, kPodmanId);
  EXPECT_EQ(p->name, "comfyui");
  EXPECT_EQ(p->pid, 245);
  auto d = decodeContainerInspect(fixture("docker-running.json"), "docker");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->name, "ollama");  // docker's "/ollama"
  EXPECT_EQ(d->pid, 6120);
}

TEST(ContainerInspect, AStoppedContainerIsRefusedWithWhatToDo) {
  auto s = decodeContainerInspect(fixture("podman-4.3.1-exited.json"), "podman");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "container comfyui is not running (podman says State.Running false): start it, then "
            "attach");
}

TEST(ContainerInspect, HostileOutputIsANamedErrorNeverAGuess) {
  const std::string id(64, 'a');
  auto one = [&](const std::string& body) { return "[{" + body + "}]"; };
  for (const std::string& text :
       {std::string(""), std::string("[]"), std::string("{}"), std::string("not json"),
        "[" + one("") + "," + one("") + "]",  // two containers for one name
        one(R"("Id":"short","Name":"x","State":{"Running":true,"Pid":1})"),
        one(R"("Id":")" + id + R"(","Name":"-bad","State":{"Running":true,"Pid":1})"),
        one(R"("Id":")" + id + R"(","Name":"x","State":{"Running":true,"Pid":-4})"),
        one(R"("Id":")" + id + R"(","Name":"x","State":{"Running":true,"Pid":99999999})"),
        one(R"("Id":")" + id + R"(","Name":"x","State":{"Running":"yes","Pid":1})"),
        one(R"("Id":")" + id + R"(","Name":"x"})"), std::string(100000, '[')}) {
    auto r = decodeContainerInspect(text, "podman");
    EXPECT_FALSE(r) << text.substr(0, 120);
    if (!r) {
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  auto ok = decodeContainerInspect(
      one(R"("Id":")" + id + R"(","Name":"x","State":{"Running":true,"Pid":7})"), "docker");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->pid, 7);
}

TEST(ContainerCgroup, TheContainersWholeCgroupFromWhereItsProcessSits) {
  const std::string id = kPodmanId;
  const std::string scope = "/machine.slice/libpod-" + id + ".scope";
  EXPECT_EQ(containerCgroup(scope, id), scope);
  EXPECT_EQ(containerCgroup(scope + "/container", id), scope);  // podman's nested cgroup
  EXPECT_EQ(containerCgroup("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" +
                                id + ".scope/container",
                            id),
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id + ".scope");
  EXPECT_EQ(containerCgroup("/system.slice/docker-" + id + ".scope", id),
            "/system.slice/docker-" + id + ".scope");
  EXPECT_EQ(containerCgroup("/docker/" + id, id), "/docker/" + id);  // cgroupfs driver
  EXPECT_EQ(containerCgroup("/libpod_parent/libpod-" + id + "/ctr", id),
            "/libpod_parent/libpod-" + id);
  // Not that container's: its monitor, another container, or no container.
  EXPECT_FALSE(containerCgroup("/machine.slice/libpod-conmon-" + id + ".scope", id));
  EXPECT_FALSE(containerCgroup("/machine.slice/libpod-" + std::string(64, 'b') + ".scope", id));
  EXPECT_FALSE(containerCgroup("/system.slice/llama.service", id));
  EXPECT_FALSE(containerCgroup(scope, id.substr(0, 12)));  // a short id names nothing here
}

}  // namespace
}  // namespace tally::attribution
