/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpu_charge.bpf.c's counter arithmetic: a charge's bytes and objects moved
 * by several CPUs at once, within a bound and never below zero. Included by
 * gpu_charge.bpf.c alone.
 */
#ifndef TALLY_BPF_GPU_CHARGE_COUNTERS_BPF_H
#define TALLY_BPF_GPU_CHARGE_COUNTERS_BPF_H

/* In the order the BPF headers need (the kernel types, then libbpf's). */
/* clang-format off */
#include "bpf/kernel_types.h"

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "bpf/gpu_charge_abi.h"
#include "bpf/gpu_charge_maps.bpf.h"
/* clang-format on */

static __always_inline void count(__u64* counter) { __sync_fetch_and_add(counter, 1); }

/* Compare-and-swap loops: a counter several CPUs move at once is read, its
 * new value computed, and written only if nobody moved it meanwhile, so no
 * reader ever sees it past its bound. One that keeps losing its race falls
 * back to add-then-check, as memcg's page counter does (a reader may see it
 * over for that instant): never a refusal for contention alone. */
#define TALLY_CAS_TRIES 32

/* *p += n unless that passes `max` (TALLY_UNBOUNDED: never refused): 0, or
 * TALLY_REFUSED_BOUND. */
static __always_inline int add_within(__u64* p, __u64 n, __u64 max) {
  if (max == TALLY_UNBOUNDED) {
    __sync_fetch_and_add(p, n);
    return 0;
  }
  for (int i = 0; i < TALLY_CAS_TRIES; i++) {
    __u64 old = *(volatile __u64*)p;
    __u64 want = old + n;
    if (want < old || want > max) return TALLY_REFUSED_BOUND;
    if (__sync_val_compare_and_swap(p, old, want) == old) return 0;
  }
  struct tally_totals* t = totals();
  if (t) count(&t->contended);
  __u64 now = __sync_add_and_fetch(p, n);
  if (now < n || now > max) {
    __sync_fetch_and_sub(p, n);
    return TALLY_REFUSED_BOUND;
  }
  return 0;
}

/* *p -= n, never below zero: 1 when it would have gone below. */
static __always_inline int sub_saturating(__u64* p, __u64 n) {
  for (int i = 0; i < TALLY_CAS_TRIES; i++) {
    __u64 old = *(volatile __u64*)p;
    __u64 want = old >= n ? old - n : 0;
    if (__sync_val_compare_and_swap(p, old, want) == old) return old < n;
  }
  struct tally_totals* t = totals();
  if (t) count(&t->contended);
  __u64 old = __sync_fetch_and_sub(p, n);
  if (old >= n) return 0;
  __sync_fetch_and_add(p, n - old); /* back to zero, never left wrapped */
  return 1;
}

static __always_inline void raise_peak(struct tally_charge* c) {
  for (int i = 0; i < TALLY_CAS_TRIES; i++) {
    __u64 now = *(volatile __u64*)&c->bytes;
    __u64 old = *(volatile __u64*)&c->peak_bytes;
    if (now <= old) return;
    if (__sync_val_compare_and_swap(&c->peak_bytes, old, now) == old) return;
  }
}

#endif
