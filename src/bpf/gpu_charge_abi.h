/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What tally's kernel charge (gpu_charge.bpf.c) and the daemon
 * (bpf/kernel_charge.h) share: the maps' keys and values and the refusal
 * event. Plain C with fixed-width fields: the same bytes on both sides.
 *
 * A lease is keyed by its cgroup's id (the cgroup directory's inode number,
 * what bpf_get_current_cgroup_id() and the kernfs node give): stable across
 * a daemon restart, unique while the cgroup exists and never reused after.
 * So a lease's charge lives as long as its cgroup's buffers do: a lease that
 * ends is marked ended (its entry stays while buffers it created live, and
 * its parent keeps counting them), and a lease attached again to the same
 * cgroup carries the charge its workload still holds.
 *
 * Who writes what: tally_lease only the daemon (whole values), tally_charge
 * and tally_totals only the programs (atomic counters; the daemon creates a
 * zero entry and deletes an ended one once it holds nothing).
 */
#ifndef TALLY_BPF_GPU_CHARGE_ABI_H
#define TALLY_BPF_GPU_CHARGE_ABI_H

#include <linux/types.h>

#include "devices/device_kind.h"

/* The layout's version: a daemon finding maps pinned by programs of another
 * layout removes them (their charges cannot be read as this one's). */
#define TALLY_CHARGE_LAYOUT 2

/* The devices whose allocations are decoded and whose objects are charged.
 * Key: the character device number as the kernel holds it (MAJOR << 20 |
 * MINOR, inode->i_rdev and device->devt), for every card, render and KFD
 * node the daemon registered. Their kinds (enum tally_device_kind) are in
 * devices/device_kind.h, where the driver catalogue names them too. */
struct tally_device {
  __u32 kind;    /* enum tally_device_kind */
  __u32 charged; /* 1: the driver's objects are memory memcg does not see (TTM: amdgpu, xe, ...) */
};

/* A bound of none. */
#define TALLY_UNBOUNDED (~0ULL)

/* tally_lease.flags */
#define TALLY_LEASE_ENDED 1u /* the lease ended: charged no more, its buffers still counted */

/* Per lease, written by the daemon only: its bound, object quota and parent. */
struct tally_lease {
  __u64 max_bytes;   /* refused past this; TALLY_UNBOUNDED: charged, never refused */
  __u64 max_objects; /* objects it may hold in the object map (past it: refused when bounded) */
  __u64 parent;      /* its parent lease's cgroup id (charged too, and its bound holds); 0: none */
  __u32 flags;       /* TALLY_LEASE_* */
  __u32 pad;
};

/* Per lease: what the kernel charged it. Created (zero) by the daemon when it
 * arms the lease; its counters are written by the programs only. `bytes` and
 * `objects` include the reservations of allocations in flight (the ioctl
 * hook reserves before the driver runs; the object's creation takes the
 * reservation over; the ioctl's end returns what no object took). */
struct tally_charge {
  __u64 bytes;            /* held now: objects created in the lease and not yet freed, + reserved */
  __u64 peak_bytes;       /* the most it held at once since its entry was made */
  __u64 objects;          /* objects held now (+ reserved) */
  __u64 refused;          /* allocations refused, every reason */
  __u64 refused_bytes;    /* bytes those asked for */
  __u64 refused_failsafe; /* of those, refused not at the bound but because the charge could
                             not be kept exact (enum tally_refusal_reason past BOUND) */
  __u64 untracked;        /* objects made in the lease and left uncharged (its object quota,
                             the full object map, a failed insert): fdinfo's floor sees them */
  __u64 underflows;       /* uncharges that would have taken it below zero (held at zero) */
  __u64 moved_in;         /* tasks moved into its cgroup tree: the meter walks fdinfo again */
  __u64 extra_bytes;      /* bytes objects made beyond what their ioctl was decoded to make */
  __u64 unseen_bytes;     /* of `bytes`, allocations that succeeded with their object unseen
                             (the init program's run skipped: a recursion miss): kept charged
                             (fail closed) until the lease ends, as nothing uncharges them */
};

/* One charged object: whose, and how much. Key: the object's address. */
struct tally_object {
  __u64 lease;
  __u64 bytes;
  __u64 parent; /* the lease's parent lease, charged too; 0: none */
};

/* Box-wide counters (one entry), written by the programs only. */
struct tally_totals {
  __u64 objects;        /* entries in tally_objects + slots reserved for allocations in flight */
  __u64 stale_objects;  /* an entry found at the address of an object being made: its
                           release was missed (a recursion miss); uncharged then */
  __u64 insert_failed;  /* objects the map could not take (kernel memory) */
  __u64 untracked_full; /* objects left untracked because the map was full */
  __u64 stale_reservations; /* reservations returned at the thread's next ioctl (its end missed) */
  __u64 orphan_uncharges;   /* uncharges whose lease entry was already gone */
  __u64 events_dropped;     /* refusals the ring buffer had no room for (still counted per lease) */
  __u64 contended;          /* charge updates that lost their race too often (held high) */
  __u64 unseen_objects;     /* allocations that succeeded with no object seen made (the init
                               program's run skipped): their bytes stay charged (unseen_bytes) */
};

/* Written by the daemon: which load of the programs acts. Each load carries
 * its own generation; during a restart old and new programs are attached at
 * once, and only the one the daemon made active charges (never both). */
struct tally_state {
  __u64 active_generation;
};

/* Why an allocation was refused. */
enum tally_refusal_reason {
  TALLY_REFUSED_BOUND = 1,      /* the lease's (or its parent's) charge + the request > its bound */
  TALLY_REFUSED_OBJECTS = 2,    /* the lease holds its object quota */
  TALLY_REFUSED_MAP_FULL = 3,   /* the object map is full: it could not be charged */
  TALLY_REFUSED_UNREADABLE = 4, /* the argument could not be read (a compat ioctl's cold page) */
  TALLY_REFUSED_UNDECODABLE = 5, /* the size the driver would make cannot be predicted */
  TALLY_REFUSED_CONTENDED = 6,   /* the charge could not be updated exactly (lost races) */
  TALLY_REFUSED_NO_MEMORY = 7,   /* the per-thread reservation record could not be made */
};

/* One refusal, as the ring buffer carries it. */
struct tally_refusal {
  __u64 lease; /* the lease whose bound or quota refused (a child's parent, when it was that) */
  __u64 requested_bytes;
  __u64 charged_bytes; /* the lease's charge when it asked */
  __u64 max_bytes;
  __u32 pid;    /* the thread group that asked */
  __u32 cmd;    /* the ioctl */
  __u32 reason; /* enum tally_refusal_reason */
  __u32 pad;
};

/* The cgroup levels the lease lookup walks from the root: a lease's own
 * cgroup must sit at most this deep (the daemon refuses one deeper); a task
 * below its lease is found at any depth. */
#define TALLY_MAX_CGROUP_DEPTH 64

#endif
