#include "attribution/container.h"

#include <algorithm>
#include <vector>

#include "util/text.h"

namespace tally::attribution {
namespace {

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    std::string_view c = path.substr(0, slash);
    if (!c.empty()) out.push_back(c);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

using text::endsWith;
using text::startsWith;

bool isHexId(std::string_view s) {
  return s.size() >= 12 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "<prefix><id>.scope" -> id
std::optional<std::string_view> scopeId(std::string_view c, std::string_view prefix) {
  if (!startsWith(c, prefix) || !endsWith(c, ".scope")) return std::nullopt;
  std::string_view id = c.substr(prefix.size(), c.size() - prefix.size() - 6);
  if (id.empty()) return std::nullopt;
  return id;
}

std::string shortId(std::string_view id) { return std::string(id.substr(0, 12)); }

std::optional<Workload> kubernetes(const std::vector<std::string_view>& parts) {
  bool underKubepods = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string_view c = parts[i];
    if (startsWith(c, "kubepods")) underKubepods = true;
    if (!underKubepods) continue;
    std::string uid;
    // systemd driver: kubepods-burstable-pod<uid with '_'>.slice
    if (auto p = c.find("-pod"); p != std::string_view::npos && endsWith(c, ".slice")) {
      uid = std::string(c.substr(p + 4, c.size() - p - 4 - 6));
      std::replace(uid.begin(), uid.end(), '_', '-');
    } else if (startsWith(c, "pod") && c.size() > 3) {  // cgroupfs driver: pod<uid>
      uid = std::string(c.substr(3));
    }
    if (uid.empty()) continue;
    Workload w{WorkloadKind::kKubernetesPod, uid, "k8s-pod:" + uid, std::nullopt, std::nullopt};
    if (i + 1 < parts.size()) {
      std::string_view ctr = parts[i + 1];
      // cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope, or a bare id
      for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "containerd-"})
        if (auto id = scopeId(ctr, prefix)) ctr = *id;
      w.container = std::string(ctr);
    }
    return w;
  }
  return std::nullopt;
}

std::optional<Workload> slurm(const std::vector<std::string_view>& parts) {
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!startsWith(parts[i], "job_") || !startsWith(parts[i + 1], "step_")) continue;
    std::string job(parts[i].substr(4));
    std::string step(parts[i + 1].substr(5));
    if (job.empty() || step.empty()) continue;
    return Workload{WorkloadKind::kSlurmStep, job, "slurm:" + job + "." + step, std::nullopt, step};
  }
  return std::nullopt;
}

}  // namespace

const char* toString(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kPodman:
      return "podman";
    case WorkloadKind::kPodmanConmon:
      return "podman-conmon";
    case WorkloadKind::kDocker:
      return "docker";
    case WorkloadKind::kKubernetesPod:
      return "kubernetes-pod";
    case WorkloadKind::kSlurmStep:
      return "slurm-step";
    case WorkloadKind::kSystemdUnit:
      return "systemd-unit";
  }
  return "?";
}

std::optional<Workload> classifyCgroup(std::string_view path) {
  auto parts = components(path);
  // Kubernetes and Slurm first: their leaves are often docker-/cri- scopes or
  // plain task dirs that the generic rules below would misname.
  if (auto k = kubernetes(parts)) return k;
  if (auto s = slurm(parts)) return s;
  // Innermost container scope wins (a container nested in a unit).
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (auto id = scopeId(*it, "libpod-conmon-"))
      return Workload{WorkloadKind::kPodmanConmon, std::string(*id),
                      "podman-conmon:" + shortId(*id), std::nullopt, std::nullopt};
    if (auto id = scopeId(*it, "libpod-"))
      return Workload{WorkloadKind::kPodman, std::string(*id), "podman:" + shortId(*id),
                      std::nullopt, std::nullopt};
    if (auto id = scopeId(*it, "docker-"))
      return Workload{WorkloadKind::kDocker, std::string(*id), "docker:" + shortId(*id),
                      std::nullopt, std::nullopt};
    // cgroupfs-driver docker: /docker/<64 hex>
    if (it + 1 != parts.rend() && *(it + 1) == "docker" && isHexId(*it))
      return Workload{WorkloadKind::kDocker, std::string(*it), "docker:" + shortId(*it),
                      std::nullopt, std::nullopt};
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (endsWith(*it, ".service") || endsWith(*it, ".scope"))
      return Workload{WorkloadKind::kSystemdUnit, std::string(*it), "unit:" + std::string(*it),
                      std::nullopt, std::nullopt};
  }
  return std::nullopt;
}

bool isContainerId(std::string_view id) { return id.size() == 64 && isHexId(id); }

std::optional<std::string> containerCgroup(std::string_view path, std::string_view id) {
  if (!isContainerId(id)) return std::nullopt;
  auto parts = components(path);
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    out += "/";
    out += parts[i];
    std::string_view c = parts[i];
    bool named = (scopeId(c, "libpod-") == id && !startsWith(c, "libpod-conmon-")) ||
                 scopeId(c, "docker-") == id || (c == id && i > 0 && parts[i - 1] == "docker") ||
                 c == "libpod-" + std::string(id);  // podman's cgroupfs manager
    if (named) return out;
  }
  return std::nullopt;
}

}  // namespace tally::attribution
