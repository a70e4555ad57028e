#include "config/config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "config/listen_address.h"
#include "config/toml_reader.h"
#include "lease/pool_name.h"
#include "util/clean_text.h"
#include "util/text.h"
#include "util/unique_fd.h"
#include "util/units.h"

namespace tally::config {

namespace detail {

// A list of user or group names (or numeric ids): resolved by the daemon at
// start (daemon/pool_access.h), so here only their form is checked.
void readNames(Reader& r, const toml::table& t, const char* key, const std::string& where,
               std::vector<std::string>& out) {
  const toml::node* an = t.get(key);
  if (!an) return;
  const toml::array* a = an->as_array();
  if (!a) {
    r.problem(*an, fmt::format("{}.{} must be an array of names or numeric ids, e.g. [\"slurm\"]",
                               where, key));
    return;
  }
  for (const auto& e : *a) {
    auto s = e.value<std::string>();
    if (!s || s->empty() || s->size() > 256 || text::cleanTextProblem(*s))
      r.problem(e, fmt::format("{}.{}: each entry must be a user or group name, or a numeric id",
                               where, key));
    else
      out.push_back(*s);
  }
}

}  // namespace detail

namespace {

using detail::integerOf;
using detail::lineOf;
using detail::readDaemon;
using detail::Reader;
using detail::readNames;

// A PCI address as sysfs and fdinfo's drm-pdev print it: 0000:c6:00.0.
bool validBdf(std::string_view s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (std::size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u, 11u}) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A pool's per-user shares and defaults: each is part of the pool's own
// limit (a share of a budget the pool does not have would be a limit nobody
// declared), and a default fits the share it is counted against.
void readShares(Reader& r, const toml::table& t, const std::string& where, Pool& p) {
  if (auto v = r.count(t, "per_user_capacity", where, 1, 1'000'000)) {
    if (*v > p.capacity)
      r.problem(*t.get("per_user_capacity"),
                fmt::format("{}.per_user_capacity {} is more than the pool's capacity {}", where,
                            *v, p.capacity));
    else
      p.perUserCapacity = *v;
  }
  struct Share {
    const char* share;
    const char* dflt;
    const char* budgetKey;
    const std::optional<std::uint64_t>& budget;
    std::optional<std::uint64_t>& shareOut;
    std::optional<std::uint64_t>& dfltOut;
  };
  for (Share s : {Share{"per_user_memory_budget", "default_memory_max", "memory_budget",
                        p.memoryBudget, p.perUserMemoryBudget, p.defaultMemoryMax},
                  Share{"per_user_gpu_memory_budget", "default_gpu_memory_max", "gpu_memory_budget",
                        p.gpuMemoryBudget, p.perUserGpuMemoryBudget, p.defaultGpuMemoryMax}}) {
    for (const char* key : {s.share, s.dflt}) {
      auto v = r.size(t, key, where);
      if (!v) continue;
      const toml::node& at = *t.get(key);
      if (!s.budget) {
        r.problem(at, fmt::format("{}.{} is set but {} is not: it is a part of the pool's {}; "
                                  "set {} too or remove it",
                                  where, key, s.budgetKey, s.budgetKey, s.budgetKey));
      } else if (*v > *s.budget) {
        r.problem(at,
                  fmt::format("{}.{} {} is more than the pool's {} {}", where, key,
                              units::humanBytes(*v), s.budgetKey, units::humanBytes(*s.budget)));
      } else {
        (key == s.share ? s.shareOut : s.dfltOut) = *v;
      }
    }
    if (s.shareOut && s.dfltOut && *s.dfltOut > *s.shareOut)
      r.problem(*t.get(s.dflt), fmt::format("{}.{} {} is more than {}.{} {}: a lease declared "
                                            "by default could never be granted",
                                            where, s.dflt, units::humanBytes(*s.dfltOut), where,
                                            s.share, units::humanBytes(*s.shareOut)));
  }
}

void readPool(Reader& r, const std::string& name, const toml::node& node, Config& c) {
  std::string where = fmt::format("pools.{}", name);
  const toml::table* t = node.as_table();
  if (!t) {
    r.problem(node, fmt::format("{} must be a table: [pools.{}]", where, name));
    return;
  }
  if (!lease::validPoolName(name))
    r.problem(node, fmt::format("pool name '{}' must be 1-64 of [A-Za-z0-9_-]", name));
  r.onlyKeys(*t, fmt::format("[{}]", where),
             {"capacity", "memory_budget", "gpu_memory_budget", "devices", "gtt_ceiling",
              "allow_users", "allow_groups", "per_user_capacity", "per_user_memory_budget",
              "per_user_gpu_memory_budget", "default_memory_max", "default_gpu_memory_max"});
  Pool p;
  p.name = name;
  p.line = lineOf(node);
  if (!t->get("capacity"))
    r.problem(
        node,
        fmt::format("{}.capacity is missing (how many leases may hold the pool at once)", where));
  if (auto v = r.count(*t, "capacity", where, 1, 1'000'000)) p.capacity = *v;
  p.memoryBudget = r.size(*t, "memory_budget", where);
  p.gpuMemoryBudget = r.size(*t, "gpu_memory_budget", where);
  if (const toml::node* gn = t->get("gtt_ceiling")) {
    auto v = gn->value<std::string>();
    auto consumer = v ? devices::parseGttConsumer(*v) : std::nullopt;
    if (!consumer)
      r.problem(*gn, fmt::format("{}.gtt_ceiling must be \"smaller\", \"graphics\" (Mesa, Vulkan) "
                                 "or \"compute\" (ROCm)",
                                 where));
    else
      p.gttCeiling = *consumer;
  }
  if (const toml::node* dn = t->get("devices")) {
    const toml::array* a = dn->as_array();
    if (!a) {
      r.problem(*dn, fmt::format(
                         "{}.devices must be an array of PCI addresses such as [\"0000:c6:00.0\"]",
                         where));
    } else {
      for (const auto& e : *a) {
        auto s = e.value<std::string>();
        if (!s || !validBdf(*s)) {
          r.problem(e, fmt::format(
                           "{}.devices: {} is not a PCI address (lowercase, e.g. \"0000:c6:00.0\")",
                           where, s ? fmt::format("'{}'", *s) : std::string("a non-string")));
        } else if (std::find(p.devices.begin(), p.devices.end(), *s) != p.devices.end()) {
          r.problem(e, fmt::format("{}.devices lists {} twice", where, *s));
        } else {
          p.devices.push_back(*s);
        }
      }
    }
    if (!p.gpuMemoryBudget)
      r.problem(
          *dn,
          fmt::format(
              "{}.devices is set but gpu_memory_budget is not; devices only scope the GPU budget",
              where));
  }
  readNames(r, *t, "allow_users", where, p.allowUsers);
  readNames(r, *t, "allow_groups", where, p.allowGroups);
  readShares(r, *t, where, p);
  c.pools.push_back(std::move(p));
}

// Units whose runs a declaration can follow: a service (podman quadlet and
// `podman generate systemd` make services) or a scope started again by name.
bool followableUnit(std::string_view unit) {
  return (text::endsWith(unit, ".service") && unit.size() > 8) ||
         (text::endsWith(unit, ".scope") && unit.size() > 6);
}

// [leases.<name>]: the table becomes the params of an attach request (sizes
// in bytes, as a client sends them), which the RPC's decoder then judges.
void readDeclaredLease(Reader& r, const std::string& name, const toml::node& node, Config& c) {
  std::string where = fmt::format("leases.{}", name);
  const toml::table* t = node.as_table();
  if (!t) {
    r.problem(node, fmt::format("{} must be a table: [leases.{}]", where, name));
    return;
  }
  std::size_t before = r.problems.size();
  r.onlyKeys(*t, fmt::format("[{}]", where),
             {"unit", "pools", "name", "memory_max", "gpu_memory_max", "gpu_memory_high",
              "gpu_memory_action", "gpu_over_samples", "priority", "attributes"});
  nlohmann::json params = nlohmann::json::object();
  auto unit = r.string(*t, "unit", where);
  if (!t->get("unit")) {
    r.problem(node, fmt::format("{}.unit is missing (the systemd unit leased each time it starts, "
                                "e.g. \"llama-server.service\")",
                                where));
  } else if (unit && !followableUnit(*unit)) {
    r.problem(*t->get("unit"),
              fmt::format("{}.unit '{}' must be a .service or .scope unit of the system manager",
                          where, *unit));
  } else if (unit) {
    params["unit"] = *unit;
  }
  if (const toml::node* pn = t->get("pools")) {
    const toml::array* a = pn->as_array();
    if (!a || a->empty()) {
      r.problem(*pn, fmt::format("{}.pools must be a non-empty array of pool names", where));
    } else {
      for (const auto& e : *a) {
        auto p = e.value<std::string>();
        if (!p)
          r.problem(e, fmt::format("{}.pools holds a non-string", where));
        else
          params["pools"].push_back(*p);
      }
    }
  } else {
    r.problem(node, fmt::format("{}.pools is missing (the pools its lease holds)", where));
  }
  params["name"] = name;
  if (auto n = r.string(*t, "name", where)) params["name"] = *n;
  for (const char* key : {"memory_max", "gpu_memory_max", "gpu_memory_high"}) {
    if (auto v = r.size(*t, key, where)) params[key] = *v;
  }
  if (auto a = r.string(*t, "gpu_memory_action", where)) params["gpu_memory_action"] = *a;
  if (auto v = r.count(*t, "gpu_over_samples", where, 1, 100)) params["gpu_over_samples"] = *v;
  if (const toml::node* pn = t->get("priority")) {
    if (auto i = integerOf(*pn))
      params["priority"] = *i;
    else
      r.problem(*pn, fmt::format("{}.priority must be an integer", where));
  }
  if (const toml::node* an = t->get("attributes")) {
    const toml::table* at = an->as_table();
    if (!at) {
      r.problem(*an, fmt::format("{}.attributes must be a table of strings, e.g. attributes = "
                                 "{{ model = \"qwen3-32b\" }}",
                                 where));
    } else {
      params["attributes"] = nlohmann::json::object();
      for (const auto& [k, v] : *at) {
        if (auto sv = v.value<std::string>())
          params["attributes"][std::string(k.str())] = *sv;
        else
          r.problem(v, fmt::format("{}.attributes.{} must be a string", where, k.str()));
      }
    }
  }
  if (r.problems.size() != before) return;
  // A declared lease is never queued behind a surprise: it is leased when it
  // can be, and said in the journal while it cannot.
  params["no_wait"] = true;
  auto decoded = rpc::api::decodeAttach(params);
  if (!decoded) {
    r.problem(node, fmt::format("{}: {}", where, decoded.error().message));
    return;
  }
  c.leases.push_back(DeclaredLease{name, lineOf(node), std::move(*decoded)});
}

// What only the whole file can say: every pool a declaration names exists,
// and no unit is declared twice.
void checkDeclaredLeases(Reader& r, const Config& c) {
  for (std::size_t i = 0; i < c.leases.size(); ++i) {
    const DeclaredLease& d = c.leases[i];
    for (const auto& p : d.attach.declared.pools) {
      if (!c.pool(p)) {
        std::string known;
        for (const auto& pool : c.pools)
          known += fmt::format("{}{}", known.empty() ? "" : ", ", pool.name);
        r.problems.push_back({d.line, fmt::format("leases.{}.pools: no pool '{}' (configured: {})",
                                                  d.name, p, known)});
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (c.leases[j].unit() == d.unit())
        r.problems.push_back(
            {d.line, fmt::format("leases.{} declares unit {} again (leases.{} at "
                                 "line {}): one unit, one declaration",
                                 d.name, d.unit(), c.leases[j].name, c.leases[j].line)});
    }
  }
}

}  // namespace

const Pool* Config::pool(std::string_view name) const {
  for (const auto& p : pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Parsed parse(std::string_view text, const std::string& path) {
  Parsed out;
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    out.problems.push_back({e.source().begin.line, std::string(e.description())});
    return out;
  }
  Reader r;
  Config c;
  c.path = path;
  r.onlyKeys(root, "the top level", {"daemon", "pools", "leases"});
  if (const toml::node* d = root.get("daemon")) {
    if (const toml::table* t = d->as_table())
      readDaemon(r, *t, c.daemon);
    else
      r.problem(*d, "daemon must be a table: [daemon]");
  }
  if (const toml::node* p = root.get("pools")) {
    if (const toml::table* t = p->as_table()) {
      for (const auto& [key, node] : *t) readPool(r, std::string(key.str()), node, c);
    } else {
      r.problem(*p, "pools must be tables: [pools.<name>]");
    }
  }
  if (const toml::node* l = root.get("leases")) {
    if (const toml::table* t = l->as_table()) {
      for (const auto& [key, node] : *t) readDeclaredLease(r, std::string(key.str()), node, c);
    } else {
      r.problem(*l, "leases must be tables: [leases.<name>]");
    }
  }
  // toml++ keeps tables sorted by key; pools and leases are listed in file order.
  std::stable_sort(c.pools.begin(), c.pools.end(),
                   [](const Pool& a, const Pool& b) { return a.line < b.line; });
  std::stable_sort(c.leases.begin(), c.leases.end(),
                   [](const DeclaredLease& a, const DeclaredLease& b) { return a.line < b.line; });
  checkDeclaredLeases(r, c);
  if (c.pools.empty() && r.problems.empty()) {
    r.problems.push_back({0, "no pools: add at least one [pools.<name>] table with a capacity"});
  }
  std::stable_sort(r.problems.begin(), r.problems.end(),
                   [](const Problem& a, const Problem& b) { return a.line < b.line; });
  out.problems = std::move(r.problems);
  if (out.problems.empty()) out.config = std::move(c);
  return out;
}

Parsed load(const std::string& path) {
  auto refuse = [&](std::string message) {
    Parsed p;
    p.problems.push_back({0, std::move(message)});
    return p;
  };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return refuse(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return refuse(fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
  // A device, a FIFO or a directory is never a config: /dev/zero would read forever.
  if (!S_ISREG(st.st_mode))
    return refuse(fmt::format("{} is not a regular file; name the TOML config file", path));
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes) {
    return refuse(fmt::format("{} is {} bytes, larger than {} KiB; that is not a tally config",
                              path, st.st_size, kMaxConfigBytes >> 10));
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    // The file may grow while read: the cap holds for what is read, too.
    if (text.size() > kMaxConfigBytes)
      return refuse(fmt::format("{} is larger than {} KiB; that is not a tally config", path,
                                kMaxConfigBytes >> 10));
  }
  return parse(text, path);
}

std::string formatProblems(const Parsed& p, const std::string& path) {
  std::string out;
  for (const auto& pr : p.problems) {
    if (pr.line)
      out += fmt::format("{}:{}: {}\n", path, pr.line, pr.message);
    else
      out += fmt::format("{}: {}\n", path, pr.message);
  }
  return out;
}

}  // namespace tally::config
