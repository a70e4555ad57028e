// What one client, one user or all of them together may make the daemon
// hold. Every limit is answered with an error the client can read (never a
// crash, never a silent drop) and is listed in docs/daemon.md ("Limits"),
// with what a client sees when it hits it. The ones an operator may need to
// move are [daemon] keys in the config (config/config.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::daemon {

struct Limits {
  // Connections. Root may always connect: `rootReserve` slots past
  // `maxConnections` are root's alone, so a flood by users never locks the
  // operator (or `tally run --pool` as root) out.
  std::size_t maxConnections = 1024;
  std::size_t maxConnectionsPerUid = 64;
  std::size_t rootReserve = 32;
  // A connection that holds nothing (no lease, no queued request, no
  // subscription) and sends nothing for this long is closed.
  std::uint64_t idleTimeoutUs = 60'000'000;
  // A request line must arrive whole within this once it has begun
  // (slow-loris clients otherwise pin 256 KiB each).
  std::uint64_t partialLineTimeoutUs = 10'000'000;

  // Bytes. A client that stops reading its replies is not read from past
  // `pauseReadingBytes` of unsent output (it cannot make the daemon produce
  // more), and is disconnected past `maxOutputBytes` (events still pile up).
  std::size_t pauseReadingBytes = 256 * 1024;
  std::size_t maxOutputBytes = 4u << 20;
  // All partial request lines together; past it the connection growing its
  // line is closed.
  std::size_t maxInputBytes = 16u << 20;
  // Lines handled per connection per turn of the event loop: one client's
  // burst of requests waits its turn behind everyone else's.
  std::size_t linesPerTurn = 16;

  // The queue. Per connection, and in total (10,000 waiting requests keep
  // `hello` under 100 ms: docs/PERFORMANCE.md).
  std::size_t maxQueuedPerConnection = 64;
  std::size_t maxQueued = 16384;
  // Per user (root not counted): one user's requests never fill the queue
  // for everyone, whatever connections she opens.
  std::size_t maxQueuedPerUid = 256;
  // Leases per user (root not counted), waiting or held, child leases
  // included: a grant moves a lease from waiting to held and changes no
  // count, so she never holds more. Each is a row in every listing, a
  // cgroup the daemon samples and an entry in the kernel charge's maps.
  std::size_t maxLeasesPerUid = 256;
  // Child leases under one lease (tally attach --parent), whoever asks.
  std::size_t maxChildrenPerLease = 64;
  // Cgroups one user's leases' fdinfo walks may visit per sample round (root
  // not counted): two leases of 16,000 cgroups each once held the daemon at
  // 60 % CPU. Past it a lease's GPU figure is not read that round (absent,
  // with the budget named); with the kernel charge on, the charge stands.
  std::size_t maxCgroupsWalkedPerUid = 4096;

  // Ledger rows a user's leases write, per minute (daemon/row_budget.h): a
  // new lease waits ("rate-limited") while its owner's are spent; rows of
  // leases that exist are always written. Root is not counted.
  std::uint64_t ledgerRowsPerMinutePerUid = 600;
  // And their bytes: a row is charged its body's size (a client's outcome
  // record is a bounded digest, so a row is a few KiB at most).
  std::uint64_t ledgerBytesPerMinutePerUid = 4u << 20;

  // Listings, metrics and lease histories (leases, pools, seats, overview,
  // metrics, lease) one user may ask for a second, after a burst of twice
  // that (daemon/query_budget.h); root is not counted. 0: no budget.
  std::uint64_t queriesPerSecondPerUid = 20;
  // And the loop time they may take, a second (after a burst of twice
  // that): the count does not see a query's cost, and a chart over a
  // month of samples costs the loop tens of ms. 0: no budget.
  std::uint64_t queryTimePerSecondPerUidUs = 100'000;

  // Ledger replays (subscribe with since_ns / after_seq) one user may have
  // under way at once (root not counted); each is served in slices, one a turn.
  std::size_t maxReplaysPerUid = 4;

  // GPU bound events a run lease's client may report: a burst, then one
  // per `boundRefillUs`. More are answered "rate-limited" and counted.
  unsigned boundBurst = 20;
  std::uint64_t boundRefillUs = 1'000'000;
  // A queued request hears what it waits for whenever its place or reason
  // changes, and at least this often (so its client can tell a long wait
  // from a dead daemon).
  std::uint64_t queueStatusEveryUs = 30'000'000;
};

}  // namespace tally::daemon
