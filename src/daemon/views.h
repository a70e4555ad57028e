// What the daemon shows: a lease as the RPC returns it, seat rows, pools,
// devices and the overview `tally top` and the metrics are made of. Read-only:
// every figure is one the meters or sysfs gave; what was not read is absent
// with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "admission/engine.h"
#include "bpf/availability.h"
#include "config/config.h"
#include "coverage/handover.h"
#include "daemon/build_info.h"
#include "daemon/headroom.h"
#include "daemon/kernel_upkeep.h"
#include "daemon/lease.h"
#include "daemon/lease_book.h"
#include "daemon/lease_events.h"
#include "host/snapshot.h"
#include "rpc/lease_api.h"
#include "rpc/messages.h"
#include "seats/seat.h"

namespace tally::daemon {

class Views {
 public:
  using json = nlohmann::json;
  Views(const config::Config& cfg, ledger::Ledger& ledger, LeaseBook& book, PoolMeasures& measures,
        host::SnapshotCache& host, const LeaseEvents& events, const coverage::Handover& handover,
        const std::string& coverageKernel, const BuildInfo& build,
        const std::vector<std::string>& cannotContain)
      : cfg_(cfg),
        ledger_(ledger),
        book_(book),
        measures_(measures),
        host_(host),
        events_(events),
        handover_(handover),
        coverageKernel_(coverageKernel),
        build_(build),
        cannotContain_(cannotContain) {}

  // A lease as acquire, attach, resume, leases and lease return it. A
  // queued one's place comes from `queued` (its queue entry and index) when
  // the caller has it, else it is looked up.
  json lease(const Lease& l, const admission::Engine::Queued* queued = nullptr,
             std::size_t index = 0);
  // The reply of acquire, attach, resume and started: the same, typed.
  rpc::api::LeaseReply leaseReply(const Lease& l);
  // Listing replies name at most this many queued requests (the next to be
  // granted, in grant order) and count the rest: 4,032 queued requests with
  // attributes once made `leases`, `seats`, `overview` and `metrics` replies
  // pass the 4 MiB a reply may be, and they failed for everyone.
  static constexpr std::size_t kQueuedListed = 256;
  // One page of the live leases (lease-id order, after `page.after`, at most
  // rpc::api::kMaxPageLeases), as `leases` rows or `seats` rows; the first
  // page then names the queue in grant order (the first kQueuedListed).
  // `page`: {"live": live leases, "listed": on this page, "next": the id to
  // ask after, or null}. Thousands of leases never make a reply pass the
  // 4 MiB a reply may be: 900 child leases once did, for everyone.
  struct Page {
    json rows = json::array();
    json facts;
  };
  Page leases(const rpc::api::ListPage& page);
  Page seatsPage(const rpc::api::ListPage& page, std::uint64_t nowNs);
  json leasesReply(const rpc::api::ListPage& page);
  json seatsReply(const rpc::api::ListPage& page, std::uint64_t nowNs);
  // {"total": queued requests, "listed": how many a listing names}.
  json queuedCounts() const;
  // One lease, live or ended, with its ledger rows (the first kLeaseRowsFirst
  // and the last kLeaseRowsLast; `ledger_omitted` counts the rest) and its
  // chart; null when there is no such lease.
  static constexpr std::size_t kLeaseRowsFirst = 64, kLeaseRowsLast = 448;
  json leaseWithRows(const std::string& id);
  // A live lease as it is now, without its rows (the `lease` query's `live`),
  // and a child's parent beside it as "parent_view": the Slurm plugin's one
  // question at a step's end answers for the step and its job.
  json liveLease(const Lease& l, const Lease* parent);
  // What the daemon itself saw of a run lease, beside its client's outcome record.
  json daemonSaw(const Lease& l);
  json pools();
  // The first page of seat rows; `nowNs` is CLOCK_REALTIME.
  json seats(std::uint64_t nowNs) { return seatsPage({}, nowNs).rows; }
  // Everything tally top and the metrics are made of.
  json overview(std::uint64_t nowNs);
  // The reply to a read-only request: leases, pools, seats, overview, metrics.
  json answer(rpc::api::Method m, std::uint64_t nowNs);

 private:
  // The live leases of a page, then (first page) the queued ones, each as `row`.
  template <typename Row>
  Page listing(const rpc::api::ListPage& page, Row row);

 public:
  // What the kernel charge does on this host (the daemon's verdict at start).
  void setKernelCharge(bpf::Verdict v) { kernelCharge_ = std::move(v); }
  // Its upkeep: ended leases' buffers, the programs' counters, the devices.
  void setKernelUpkeep(const KernelUpkeep* u) { upkeep_ = u; }

 private:
  // A waiter's wait in one line, as its client hears it ("pool gpu is full:
  // 4 of 4 leases hold it"), from queue index `index`; "" when none.
  std::string waitingLine(std::size_t index);
  // Each pool's headroom as measured once for the listing being made (a
  // page's waiters share it); cleared when a listing starts.
  std::map<std::string, admission::Headroom> headroomSeen_;
  bpf::Verdict kernelCharge_{{}, "not loaded (a daemon without the kernel charge)"};
  const KernelUpkeep* upkeep_ = nullptr;
  // kernel_charge's counters, room, devices and ended leases (overview).
  json kernelChargeState() const;
  seats::SeatFacts seatFacts(const Lease& l) const;
  // Devices with their regions, and GPU memory in use outside every lease.
  json devices(json& outsideLeases);

  const config::Config& cfg_;
  ledger::Ledger& ledger_;
  LeaseBook& book_;
  PoolMeasures& measures_;
  host::SnapshotCache& host_;
  const LeaseEvents& events_;
  const coverage::Handover& handover_;
  const std::string& coverageKernel_;
  const BuildInfo& build_;
  const std::vector<std::string>& cannotContain_;
};

}  // namespace tally::daemon
