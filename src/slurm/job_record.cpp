#include "slurm/job_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <charconv>

#include "lease/lease_id.h"

namespace tally::slurm {

namespace {

constexpr std::string_view kMagic = "tally-slurm-job 1 ";

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
  if (name.empty() || name.size() > 64 || name.find_first_of(":;=/() ") != std::string_view::npos)
    return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  return true;
}

std::string encodeJobRecord(const JobRecord& r) {
  std::string gres = r.gres ? fmt::format("{}:{}", r.gres->name, r.gres->count) : "none";
  std::string het = r.het ? fmt::format(" het={}+{}", r.het->leader, r.het->offset) : "";
  std::string lease = r.jobLease.empty() ? "" : " lease=" + r.jobLease;
  return fmt::format("{}job={} asked={} gres={}{}{}\n", kMagic, r.job, fmt::join(r.asked, ","),
                     gres, het, lease);
}

Result<JobRecord> decodeJobRecord(std::string_view text) {
  auto bad = [](std::string_view why) {
    return Error{EINVAL, fmt::format("the job's kept GRES record is malformed: {}", why)};
  };
  if (text.substr(0, kMagic.size()) != kMagic) return bad("not a version 1 record");
  text.remove_prefix(kMagic.size());
  if (text.empty() || text.back() != '\n') return bad("not one whole line");
  text.remove_suffix(1);
  // Three fields, in order, each KEY=VALUE, then het= for a heterogeneous
  // job's component and lease= once the job's lease is granted, each optional.
  std::string_view fields[5];
  std::size_t fieldCount = 0;
  for (; fieldCount < 5 && !text.empty(); ++fieldCount) {
    auto space = text.find(' ');
    if (space == 0 || space + 1 == text.size()) return bad("not job=, asked= and gres=");
    fields[fieldCount] = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (fieldCount < 3 || !text.empty()) return bad("not job=, asked= and gres=");
  auto value = [&](std::size_t i, std::string_view key) -> std::optional<std::string_view> {
    if (fields[i].substr(0, key.size()) != key) return std::nullopt;
    return fields[i].substr(key.size());
  };
  auto jobText = value(0, "job=");
  auto askedText = value(1, "asked=");
  auto gresText = value(2, "gres=");
  if (!jobText || !askedText || !gresText) return bad("not job=, asked= and gres=");
  auto job = digits<std::uint32_t>(*jobText);
  if (!job || *job == 0) return bad("job= is not a job id");
  JobRecord r;
  r.job = *job;
  for (std::size_t at = 0;;) {
    auto comma = askedText->find(',', at);
    std::string_view name =
        askedText->substr(at, comma == std::string_view::npos ? comma : comma - at);
    if (!validGresName(name) || r.asked.size() == 4) return bad("asked= is not 1 to 4 GRES names");
    r.asked.emplace_back(name);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  std::size_t next = 3;
  if (next < fieldCount && value(next, "het=")) {
    auto hetText = value(next++, "het=");
    auto plus = hetText->find('+');
    if (plus == std::string_view::npos) return bad("het= is not LEADER+OFFSET");
    auto leader = digits<std::uint32_t>(hetText->substr(0, plus));
    auto offset = digits<std::uint32_t>(hetText->substr(plus + 1));
    if (!leader || *leader == 0 || !offset) return bad("het= is not LEADER+OFFSET");
    r.het = HetJob{*leader, *offset};
  }
  if (next < fieldCount) {
    auto leaseText = value(next++, "lease=");
    if (!leaseText || !lease::validLeaseId(*leaseText)) return bad("lease= is not a lease id");
    r.jobLease = std::string(*leaseText);
  }
  if (next != fieldCount) return bad("a field after lease=");
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
