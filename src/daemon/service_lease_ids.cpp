// Service, the lease-id half: an id as a client gives it (whole, or its
// first characters), whose lease it is, and the `lease` query by id.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <vector>

#include "daemon/service.h"

namespace tally::daemon {

using json = nlohmann::json;
namespace code = rpc::code;

Result<std::string> Service::leaseIdOf(const std::string& given, bool ledgerToo) {
  if (book_.find(given)) return given;
  // Too short a start names a lease by chance (root typing `release 3`
  // would stop someone's job): four characters at least, as git asks.
  constexpr std::size_t kShortest = 4;
  if (given.size() < kShortest)
    return Error{ENOENT, fmt::format("no lease {}: give its whole id, or at least its first {} "
                                     "characters",
                                     given, kShortest)};
  std::set<std::string> ids;
  constexpr std::size_t kShown = 3;
  // Live ones: the book is ordered by id, so the prefix's range is one walk.
  for (auto it = book_.all().lower_bound(given);
       it != book_.all().end() && it->first.rfind(given, 0) == 0 && ids.size() <= kShown; ++it)
    ids.insert(it->first);
  if (ledgerToo && !given.empty()) {
    auto stored = ledger_.leaseIdsStartingWith(given, kShown + 1);
    if (!stored)
      return Error{EIO, fmt::format("lease {}: the ledger could not be read: {}", given,
                                    stored.error().message)};
    ids.insert(stored->begin(), stored->end());
  }
  if (ids.size() == 1) return *ids.begin();
  if (ids.empty())
    return Error{ENOENT, ledgerToo ? fmt::format("no lease {} (live or in the ledger)", given)
                                   : fmt::format("no live lease {} (ended leases are in 'tally "
                                                 "ledger')",
                                                 given)};
  std::vector<std::string> shown(ids.begin(), ids.end());
  if (shown.size() > kShown) shown.resize(kShown);
  return Error{EEXIST, fmt::format("lease id {} is the start of {} leases ({}{}): give more of it",
                                   given, ids.size() > kShown ? "more than 3" : "several",
                                   fmt::join(shown, ", "), ids.size() > kShown ? ", …" : "")};
}

Lease* Service::owned(std::uint64_t conn, const Peer& peer, const json& id,
                      const std::string& given) {
  auto full = leaseIdOf(given, false);
  Lease* l = full ? book_.find(*full) : nullptr;
  if (!l) {
    fail(conn, id, code::kNotFound, full.error().message);
    return nullptr;
  }
  const std::string& lease = l->id;
  if (peer.uid != 0 && peer.uid != l->owner) {
    fail(conn, id, code::kForbidden,
         fmt::format("lease {} belongs to uid {}; only its owner or root may do this", lease,
                     l->owner));
    return nullptr;
  }
  return l;
}

void Service::onLeaseQuery(std::uint64_t conn, const json& id, const rpc::api::LeaseQuery& p) {
  auto full = leaseIdOf(p.lease, true);
  if (!full) return fail(conn, id, code::kNotFound, full.error().message);
  Lease* l = book_.find(*full);
  Lease* parent = p.live && l && !l->parent.empty() ? book_.find(l->parent) : nullptr;
  if (l) sampler_.refreshCharge(*l, parent);
  json r = p.live && l ? views_.liveLease(*l, parent) : views_.leaseWithRows(*full);
  if (r.is_null())
    return fail(conn, id, code::kNotFound,
                fmt::format("no lease {} (live or in the ledger)", p.lease));
  reply(conn, id, r);
}

}  // namespace tally::daemon
