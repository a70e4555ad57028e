// What runs in a cgroup, recognised from its path alone (pure): podman and
// docker containers, Kubernetes pods, Slurm job steps, systemd units.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tally::attribution {

enum class WorkloadKind {
  kPodman,         // .../libpod-<id>.scope
  kPodmanConmon,   // .../libpod-conmon-<id>.scope: podman's monitor, not the container
  kDocker,         // .../docker-<id>.scope or /docker/<id>
  kKubernetesPod,  // .../kubepods.../pod<uid>/... (systemd or cgroupfs driver)
  kSlurmStep,      // .../job_<id>/step_<n>/...
  kSystemdUnit,    // the deepest *.service or *.scope
};
const char* toString(WorkloadKind k);

struct Workload {
  WorkloadKind kind = WorkloadKind::kSystemdUnit;
  std::string id;  // container id, pod uid, Slurm job id, or unit name
  std::string
      name;  // display: "podman:1a2b3c4d5e6f", "k8s-pod:<uid>", "slurm:42.0", "unit:x.service"
  std::optional<std::string> container;  // k8s: the container id below the pod, when present
  std::optional<std::string> step;       // slurm: step name ("0", "batch", "extern")
};

// nullopt for a cgroup no recogniser claims (e.g. "/" or "/user.slice").
std::optional<Workload> classifyCgroup(std::string_view path);

// A full container id: 64 lowercase hex digits (podman's and docker's).
bool isContainerId(std::string_view id);

// The whole cgroup of the container `id` (full 64-hex id) that `path` is in
// or below: podman's /machine.slice/libpod-<id>.scope (also when its
// processes sit in a nested .../container cgroup), docker's
// /system.slice/docker-<id>.scope or cgroupfs /docker/<id>. nullopt when
// `path` is not that container's (its monitor, libpod-conmon-<id>, is not).
std::optional<std::string> containerCgroup(std::string_view path, std::string_view id);

}  // namespace tally::attribution
