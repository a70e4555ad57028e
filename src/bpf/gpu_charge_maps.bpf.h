/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpu_charge.bpf.c's maps (all pinned, so a new load of the programs takes
 * over an old one's charges), the values the loader sets before load, and
 * the lookups every program makes (this thread's reservation record, whether
 * this load is the active one, the totals). Included by
 * gpu_charge.bpf.c alone (one BPF program, one object: libbpf-bootstrap's
 * layout), never by userspace: the layouts userspace shares are
 * gpu_charge_abi.h's.
 */
#ifndef TALLY_BPF_GPU_CHARGE_MAPS_BPF_H
#define TALLY_BPF_GPU_CHARGE_MAPS_BPF_H

/* In the order the BPF headers need (the kernel types, then libbpf's). */
/* clang-format off */
#include "bpf/kernel_types.h"

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "bpf/gpu_charge_abi.h"
/* clang-format on */

/* Set by the loader before load: this load's generation (only the active one
 * acts) and the object map's room (its max_entries). */
const volatile __u64 tally_generation = 0;
const volatile __u64 tally_objects_capacity = 1;

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, __u32);
  __type(value, struct tally_device);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_devices SEC(".maps");

/* max_entries of the lease and object maps: set by the loader from the host
 * (bpf/kernel_charge_bpf.cpp). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct tally_lease);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_leases SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct tally_charge);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_charges SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1 << 20);
  __type(key, __u64);
  __type(value, struct tally_object);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_objects SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct tally_totals);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_totals SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct tally_state);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_state SEC(".maps");

/* Per thread, for the length of one ioctl: the reservation its hook made
 * (bytes and an object slot, on `lease` and `parent`), and whether the
 * ioctl's objects are not memory to charge. Keyed by the thread (pid_tgid),
 * made by the hook and deleted when the ioctl ends, so only threads inside a
 * decoded ioctl have one. A hash rather than task storage: on 6.1 the
 * sleepable hook's task-storage create holds a per-CPU lock while it may
 * sleep, and every other task's lookup on that CPU fails meanwhile. Pinned,
 * so a new load of the programs takes over an old one's reservations. */
struct tally_inflight {
  __u64 lease, parent;
  __u64 bytes;    /* reserved bytes no object has taken yet */
  __u64 taken_by; /* the object that took the reservation (0: none yet) */
  __u64 taken;    /* how much of it that object took */
  __u32 slot;     /* 1: an object slot is reserved and untaken */
  __u32 uncounted;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1 << 18);
  __type(key, __u64);
  __type(value, struct tally_inflight);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_inflight SEC(".maps");

static __always_inline struct tally_inflight* inflight(void) {
  __u64 me = bpf_get_current_pid_tgid();
  return bpf_map_lookup_elem(&tally_inflight, &me);
}

/* This thread's record, made when it has none. */
static __always_inline struct tally_inflight* inflight_made(void) {
  __u64 me = bpf_get_current_pid_tgid();
  struct tally_inflight* f = bpf_map_lookup_elem(&tally_inflight, &me);
  if (f) return f;
  struct tally_inflight fresh = {};
  if (bpf_map_update_elem(&tally_inflight, &me, &fresh, BPF_NOEXIST) != 0) return 0;
  return bpf_map_lookup_elem(&tally_inflight, &me);
}

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 * 1024);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_refusals SEC(".maps");

/* Whether this load of the programs is the one the daemon made active. */
static __always_inline int active(void) {
  __u32 zero = 0;
  struct tally_state* s = bpf_map_lookup_elem(&tally_state, &zero);
  return s && s->active_generation == tally_generation;
}

static __always_inline struct tally_totals* totals(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&tally_totals, &zero);
}

#endif
