#include "slurm/job_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <charconv>

#include "lease/lease_id.h"

namespace tally::slurm {

namespace {

constexpr std::string_view kMagic = "tally-slurm-job 2 ";

// Decimal digits as encodeJobRecord writes them: no sign, no leading zero,
// within T (one spelling per value: what reads writes back the same).
template <typename T>
std::optional<T> digits(std::string_view s) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string_view::npos ||
      (s.size() > 1 && s[0] == '0'))
    return std::nullopt;
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

bool validGresName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.find_first_of(":;=/(), ") != std::string_view::npos)
    return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  return true;
}

bool validRecordWord(std::string_view word) {
  if (word.empty() || word.size() > 64) return false;
  for (char c : word)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

std::string encodeJobRecord(const JobRecord& r) {
  std::string text = fmt::format("{}job={} cgroup={} asked={} gres=", kMagic, r.job, r.cgroupId,
                                 fmt::join(r.asked, ","));
  text += r.gres ? fmt::format("{}:{}", r.gres->name, r.gres->count) : "none";
  if (r.het) text += fmt::format(" het={}+{}", r.het->leader, r.het->offset);
  if (validRecordWord(r.account)) text += " account=" + r.account;
  if (validRecordWord(r.partition)) text += " partition=" + r.partition;
  if (!r.jobLease.empty()) text += " lease=" + r.jobLease;
  return text + "\n";
}

Result<JobRecord> decodeJobRecord(std::string_view text) {
  auto bad = [](std::string_view why) {
    return Error{EINVAL, fmt::format("the job's kept GRES record is malformed: {}", why)};
  };
  if (text.substr(0, kMagic.size()) != kMagic) return bad("not a version 2 record");
  text.remove_prefix(kMagic.size());
  if (text.empty() || text.back() != '\n') return bad("not one whole line");
  text.remove_suffix(1);
  // Four fields, in order, each KEY=VALUE, then het=, account=, partition=
  // and lease=, each optional, in that order.
  constexpr std::size_t kMost = 8;
  std::string_view fields[kMost];
  std::size_t fieldCount = 0;
  for (; fieldCount < kMost && !text.empty(); ++fieldCount) {
    auto space = text.find(' ');
    if (space == 0 || space + 1 == text.size()) return bad("an empty field");
    fields[fieldCount] = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (fieldCount < 4 || !text.empty()) return bad("not job=, cgroup=, asked= and gres=");
  auto value = [&](std::size_t i, std::string_view key) -> std::optional<std::string_view> {
    if (i >= fieldCount || fields[i].substr(0, key.size()) != key) return std::nullopt;
    return fields[i].substr(key.size());
  };
  auto jobText = value(0, "job=");
  auto cgroupText = value(1, "cgroup=");
  auto askedText = value(2, "asked=");
  auto gresText = value(3, "gres=");
  if (!jobText || !cgroupText || !askedText || !gresText)
    return bad("not job=, cgroup=, asked= and gres=");
  auto job = digits<std::uint32_t>(*jobText);
  if (!job || *job == 0) return bad("job= is not a job id");
  auto cgroupId = digits<std::uint64_t>(*cgroupText);
  if (!cgroupId || *cgroupId == 0) return bad("cgroup= is not a cgroup id");
  JobRecord r;
  r.job = *job;
  r.cgroupId = *cgroupId;
  for (std::size_t at = 0;;) {
    auto comma = askedText->find(',', at);
    std::string_view name =
        askedText->substr(at, comma == std::string_view::npos ? comma : comma - at);
    if (!validGresName(name) || r.asked.size() == 4) return bad("asked= is not 1 to 4 GRES names");
    r.asked.emplace_back(name);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  std::size_t next = 4;
  if (auto hetText = value(next, "het=")) {
    ++next;
    auto plus = hetText->find('+');
    if (plus == std::string_view::npos) return bad("het= is not LEADER+OFFSET");
    auto leader = digits<std::uint32_t>(hetText->substr(0, plus));
    auto offset = digits<std::uint32_t>(hetText->substr(plus + 1));
    if (!leader || *leader == 0 || !offset) return bad("het= is not LEADER+OFFSET");
    r.het = HetJob{*leader, *offset};
  }
  for (auto [key, out] :
       {std::pair{"account=", &r.account}, std::pair{"partition=", &r.partition}}) {
    auto word = value(next, key);
    if (!word) continue;
    ++next;
    if (!validRecordWord(*word)) return bad(fmt::format("{} is not a name", key));
    *out = std::string(*word);
  }
  if (auto leaseText = value(next, "lease=")) {
    ++next;
    if (!lease::validLeaseId(*leaseText)) return bad("lease= is not a lease id");
    r.jobLease = std::string(*leaseText);
  }
  if (next != fieldCount) return bad("an unknown field, or fields out of order");
  if (*gresText == "none") return r;
  auto colon = gresText->find(':');
  if (colon == std::string_view::npos) return bad("gres= is neither none nor NAME:BYTES");
  auto count = digits<std::uint64_t>(gresText->substr(colon + 1));
  std::string_view name = gresText->substr(0, colon);
  if (!count || !validGresName(name)) return bad("gres= is neither none nor NAME:BYTES");
  bool asked = false;
  for (const auto& a : r.asked) asked = asked || a == name;
  if (!asked) return bad("gres= names a GRES asked= does not");
  r.gres = GresFound{std::string(name), *count};
  return r;
}

std::string jobRecordName(std::uint32_t job) { return fmt::format("job_{}", job); }

std::optional<std::uint32_t> jobOfRecordName(std::string_view name) {
  if (name.substr(0, 4) != "job_") return std::nullopt;
  auto job = digits<std::uint32_t>(name.substr(4));
  if (!job || *job == 0) return std::nullopt;
  return job;
}

}  // namespace tally::slurm
