#include "config/suggest.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/units.h"

namespace tally::config {

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;

// A size as the config takes it, rounded down to whole MiB (what a budget
// promises is never more than measured): "96GiB", "98816MiB".
std::string size(std::uint64_t bytes) {
  std::uint64_t mib = bytes / kMiB;
  if (mib % 1024 == 0) return fmt::format("\"{}GiB\"", mib / 1024);
  return fmt::format("\"{}MiB\"", mib);
}

}  // namespace

Result<std::string> suggestConfig(const HostFigures& host, const SuggestOptions& o) {
  if (!host.memTotal)
    return Error{0, "cannot read MemTotal from /proc/meminfo; a budget needs the host's size"};
  if (o.capacity == 0) return Error{0, "--capacity must be at least 1"};
  const std::uint64_t total = *host.memTotal;
  // Rounded up to a whole GiB: the reserve errs on the host's side.
  std::uint64_t reserve =
      o.reserve.value_or((std::max(4 * kGiB, total / 8) + kGiB - 1) / kGiB * kGiB);
  if (reserve >= total || total - reserve < kGiB)
    return Error{0, fmt::format("--reserve {} leaves less than 1 GiB of MemTotal {} to budget",
                                units::humanBytes(reserve), units::humanBytes(total))};
  const std::uint64_t usable = total - reserve;
  std::uint64_t gtt = 0, vram = 0;
  for (const auto& g : host.gpus) {
    gtt += g.gttCeiling.value_or(0);  // no region: nothing of it to budget
    vram += g.vramTotal.value_or(0);
  }
  const std::uint64_t gttBudget = std::min(gtt, usable);
  const std::uint64_t hostBudget = usable - gttBudget;
  // Each lease's default share is whole MiB (a size the config takes); one
  // that rounds to nothing is no share.
  if ((host.gpus.empty() ? usable : gttBudget + vram) / o.capacity < kMiB)
    return Error{0, fmt::format("--capacity {} leaves each lease less than 1 MiB of the budget; "
                                "ask for fewer",
                                o.capacity)};

  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("# tally config suggest: pools from what this host holds (like slurmd -C).");
  line("# Review it, check it (tally config check FILE), install it as /etc/tally/tally.toml.");
  line("#");
  line(fmt::format("# MemTotal      {}", units::humanBytes(total)));
  line(fmt::format("# reserve       {}  kept for the system and what runs unleased{}",
                   units::humanBytes(reserve),
                   o.reserve ? " (--reserve)" : " (--reserve to change)"));
  for (const auto& g : host.gpus)
    line(fmt::format(
        "# {}  {}, {}", g.device,
        g.gttCeiling
            ? fmt::format("GTT ceiling {} ({})", units::humanBytes(*g.gttCeiling), g.ceilingWords)
            : std::string("no GTT region"),
        g.vramTotal ? "VRAM " + units::humanBytes(*g.vramTotal) : std::string("no VRAM region")));
  for (const auto& why : host.leftOut) line(fmt::format("# left out: {}", why));
  if (!host.gpus.empty()) {
    line("#");
    line("# GTT is system RAM the memory cgroup does not see: the GPU and host budgets");
    line("# share MemTotal less the reserve, so every lease at its declared bounds at");
    line("# once still fits in RAM.");
  }
  line("");
  line("[daemon]");
  line("# socket_group = \"tally\"   # who may ask for leases besides root (groupadd tally first)");
  line("");
  const std::string share =
      o.capacity == 1 ? std::string("all of it") : fmt::format("1/{} each", o.capacity);
  if (!host.gpus.empty()) {
    line("[pools.gpu]");
    line(fmt::format("capacity = {}", o.capacity));
    std::string devices;
    bool named = true;
    for (const auto& g : host.gpus) {
      devices += (devices.empty() ? "\"" : ", \"") + g.device + "\"";
      named = named && g.pci;
    }
    if (named)
      line(fmt::format("devices = [{}]", devices));
    else
      line("# devices: none named (every GPU with mem_info_*): one has no PCI address to name");
    const std::uint64_t gpuBudget = gttBudget + vram;
    bool anyVram = std::any_of(host.gpus.begin(), host.gpus.end(),
                               [](const auto& g) { return g.vramTotal.has_value(); });
    line(fmt::format(
        "gpu_memory_budget = {}   # GTT ceiling{}{}", size(gpuBudget),
        gttBudget < gtt ? fmt::format(" {} cut to MemTotal - reserve", units::humanBytes(gtt)) : "",
        anyVram ? " + VRAM " + units::humanBytes(vram) : std::string()));
    line(fmt::format("default_gpu_memory_max = {}   # a bare tally run --pool gpu: {}",
                     size(gpuBudget / o.capacity), share));
    if (hostBudget >= kGiB && hostBudget / o.capacity >= kMiB) {
      line(fmt::format("memory_budget = {}   # MemTotal - reserve - GTT", size(hostBudget)));
      line(fmt::format("default_memory_max = {}", size(hostBudget / o.capacity)));
    } else {
      line("# No memory_budget: the GTT ceiling takes all of MemTotal less the reserve.");
      line("# Lower the GTT ceiling (ttm.pages_limit) or the reserve to budget host memory.");
    }
  } else {
    line("# No GPU with memory figures (mem_info_*): one host memory pool.");
    line("[pools.host]");
    line(fmt::format("capacity = {}", o.capacity));
    line(fmt::format("memory_budget = {}   # MemTotal - reserve", size(usable)));
    line(fmt::format("default_memory_max = {}   # a bare tally run --pool host: {}",
                     size(usable / o.capacity), share));
  }
  return out;
}

}  // namespace tally::config
