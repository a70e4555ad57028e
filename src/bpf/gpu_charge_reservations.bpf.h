/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpu_charge.bpf.c's leases and what goes back to them: the lease a task
 * allocates in, an uncharge, and an ioctl's reservation (tally_inflight)
 * returned, kept as unseen, or settled when its end was missed. Included by
 * gpu_charge.bpf.c alone.
 */
#ifndef TALLY_BPF_GPU_CHARGE_RESERVATIONS_BPF_H
#define TALLY_BPF_GPU_CHARGE_RESERVATIONS_BPF_H

/* In the order the BPF headers need (the kernel types, then libbpf's). */
/* clang-format off */
#include "bpf/kernel_types.h"

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "bpf/gpu_charge_abi.h"
#include "bpf/gpu_charge_maps.bpf.h"
#include "bpf/gpu_charge_counters.bpf.h"
/* clang-format on */

/* The innermost lease among the current task's cgroup ancestors that is armed
 * and not ended. Walked from the root down by level (the kernel keeps each
 * cgroup's ancestors in an array), so a task nested however deep under its
 * lease is found; a lease's own cgroup sits in the first
 * TALLY_MAX_CGROUP_DEPTH levels (the daemon refuses a deeper one). */
static __always_inline __u64 current_lease(struct tally_lease** out) {
  __u64 found = 0;
  struct tally_lease* fl = 0;
  for (int level = 1; level <= TALLY_MAX_CGROUP_DEPTH; level++) {
    __u64 id = bpf_get_current_ancestor_cgroup_id(level);
    if (!id) break; /* deeper than the task's own cgroup */
    struct tally_lease* l = bpf_map_lookup_elem(&tally_leases, &id);
    if (!l || (l->flags & TALLY_LEASE_ENDED)) continue;
    found = id;
    fl = l;
  }
  *out = fl;
  return found;
}

/* One lease's charge gives back `bytes` and `objects`. */
static __always_inline void uncharge(__u64 lease, __u64 bytes, __u64 objects) {
  if (!lease) return;
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &lease);
  if (!c) {
    struct tally_totals* t = totals();
    if (t) count(&t->orphan_uncharges);
    return;
  }
  if (sub_saturating(&c->bytes, bytes)) count(&c->underflows);
  if (objects && sub_saturating(&c->objects, objects)) count(&c->underflows);
}

static __always_inline void return_slot(void) {
  struct tally_totals* t = totals();
  if (t) sub_saturating(&t->objects, 1);
}

/* A reservation no object took (the ioctl failed, or made less than it
 * asked) goes back. */
static __always_inline void release_reservation(struct tally_inflight* f) {
  __u64 bytes = f->bytes;
  __u32 slot = f->slot;
  f->bytes = 0;
  f->slot = 0;
  f->taken_by = 0;
  f->taken = 0;
  if (!bytes && !slot) return;
  uncharge(f->lease, bytes, slot);
  if (f->parent) uncharge(f->parent, bytes, slot);
  if (slot) return_slot();
}

/* An allocation that succeeded with its object slot untaken: the driver made
 * the object and the init program's run was skipped (a recursion miss: a
 * tracing program is not run on a CPU where it is already running, as when
 * the task running it was preempted). Nothing will uncharge an object the
 * map does not hold, so its reserved bytes stay charged as unseen (fail
 * closed: the lease may be refused early by them, never pass its bound) until
 * the lease ends; only its object slot goes back. */
static __always_inline void keep_unseen(struct tally_inflight* f) {
  __u64 bytes = f->bytes;
  f->bytes = 0;
  f->slot = 0;
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &f->lease);
  if (c) {
    __sync_fetch_and_add(&c->unseen_bytes, bytes);
    if (sub_saturating(&c->objects, 1)) count(&c->underflows);
    raise_peak(c);
  }
  if (f->parent) {
    struct tally_charge* pc = bpf_map_lookup_elem(&tally_charges, &f->parent);
    if (pc) {
      __sync_fetch_and_add(&pc->unseen_bytes, bytes);
      if (sub_saturating(&pc->objects, 1)) count(&pc->underflows);
      raise_peak(pc);
    }
  }
  return_slot();
  struct tally_totals* t = totals();
  if (t) count(&t->unseen_objects);
}

/* The thread's record at the start of an ioctl belongs to an earlier one
 * whose end was not seen (the exit program's run skipped): settled now, in the
 * LSM hook, which the kernel never skips. Whether its allocation made its
 * object is not known, so an untaken slot is kept as unseen (fail closed);
 * the rest goes back, and its object-taken and uncounted notes end. */
static __always_inline void settle_stale(void) {
  __u64 me = bpf_get_current_pid_tgid();
  struct tally_inflight* f = bpf_map_lookup_elem(&tally_inflight, &me);
  if (!f) return;
  if (f->slot) keep_unseen(f);
  release_reservation(f);
  bpf_map_delete_elem(&tally_inflight, &me);
  struct tally_totals* t = totals();
  if (t) count(&t->stale_reservations);
}

#endif
