// SPDX-License-Identifier: GPL-2.0
/*
 * tally's in-kernel GPU memory charge and bound (docs/enforcement.md, "In the
 * kernel").
 *
 * Charge. Every GEM buffer object, whatever the driver, is initialised by
 * drm_gem_private_object_init() (drm_gem_object_init() calls it for shmem
 * objects; amdgpu_bo_create, xe_bo_init and TTM-based drivers call it
 * directly) and released by drm_gem_object_release() from the driver's free
 * path. Both are exported (EXPORT_SYMBOL), so the fentry points exist on
 * every kernel and are called across module boundaries, never inlined away.
 * At init the object is charged to the lease of the creating task (the
 * innermost of its cgroup's ancestors that the daemon armed, and that lease's
 * parent too when it is a child lease); at release it is uncharged from
 * them, whoever holds its handles or fds by then. So a lease's figure
 * follows creation, not fd tables: no fd trick hides it and a buffer passed
 * to another lease stays its creator's.
 *
 * Refuse, exactly. The BPF LSM's file_ioctl hook (sleepable: it reads the
 * argument with bpf_copy_from_user(), which faults the page in as the
 * driver's copy_from_user() will) sees every ioctl before the driver does.
 * On a device the daemon registered, an allocation it decodes (gpu_ioctl.h)
 * is *reserved* before it is admitted, as memcg's try-charge does: the
 * lease's charge (and its parent's) takes the bytes and one object slot by
 * compare-and-swap, or the ioctl is refused with -ENOMEM when that would
 * pass its bound, its object quota or the object map's room. The object's
 * init takes the reservation over; the ioctl's end (fexit of the ioctl
 * syscall) returns what no object took. So threads racing at the bound never
 * hold more than it together, and a child racing its parent neither.
 *
 * Fail closed. For a bounded lease, an allocation the hook cannot decide
 * exactly (an argument it cannot read in the compat hook, a size that wraps
 * in the driver's arithmetic, a lost update race, no room for the reservation
 * record or the object) is refused and counted with its reason, never passed.
 * An uncharge never takes a charge below zero (held at zero, counted).
 *
 * Ended leases. The daemon marks a lease that ends (TALLY_LEASE_ENDED) and
 * keeps its entry while buffers it created live: they stay counted in it and
 * in its parent (as memcg reparents a removed cgroup's charges), and a lease
 * attached again to the same cgroup carries them on.
 *
 * What it cannot see is in docs/enforcement.md.
 */
#include "bpf/kernel_types.h"

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "bpf/gpu_charge_abi.h"
#include "bpf/gpu_ioctl.h"

#define ENOMEM 12
#define S_IFMT 00170000
#define S_IFCHR 0020000

char LICENSE[] SEC("license") = "GPL";

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

static __always_inline struct tally_device* device_of(struct drm_device* dev) {
  __u32 devt = BPF_CORE_READ(dev, primary, kdev, devt);
  struct tally_device* d = devt ? bpf_map_lookup_elem(&tally_devices, &devt) : 0;
  if (d) return d;
  devt = BPF_CORE_READ(dev, render, kdev, devt);
  return devt ? bpf_map_lookup_elem(&tally_devices, &devt) : 0;
}

SEC("fentry/drm_gem_private_object_init")
int BPF_PROG(tally_charge_object, struct drm_device* dev, struct drm_gem_object* obj, __u64 size) {
  struct tally_device* d = device_of(dev);
  if (!d || !d->charged || !active()) return 0;
  struct tally_inflight* f = inflight();
  if (f && f->uncounted) return 0;
  struct tally_totals* t = totals();
  if (!t) return 0;
  __u64 key = (__u64)obj;

  /* An entry at the address of an object being made belongs to one freed
   * without its release seen (a recursion miss): uncharged now, so it
   * neither blocks this object nor later uncharges the wrong lease. */
  struct tally_object* stale = bpf_map_lookup_elem(&tally_objects, &key);
  if (stale) {
    struct tally_object s = *stale;
    if (bpf_map_delete_elem(&tally_objects, &key) == 0) {
      uncharge(s.lease, s.bytes, 1);
      if (s.parent) uncharge(s.parent, s.bytes, 1);
      return_slot();
      count(&t->stale_objects);
    }
  }

  __u64 lease = 0, parent = 0;
  struct tally_charge *c = 0, *pc = 0;
  if (f && f->slot) {
    /* The allocation its ioctl reserved: the reservation becomes the
     * object's charge; what it makes beyond the decoded size is added. */
    lease = f->lease;
    parent = f->parent;
    c = bpf_map_lookup_elem(&tally_charges, &lease);
    pc = parent ? bpf_map_lookup_elem(&tally_charges, &parent) : 0;
    __u64 take = size < f->bytes ? size : f->bytes;
    __u64 extra = size - take;
    f->bytes -= take;
    f->slot = 0;
    f->taken_by = key;
    f->taken = take;
    if (!c) { /* the entry went (cannot while reserved): nothing to charge */
      return_slot();
      return 0;
    }
    if (extra) {
      __sync_fetch_and_add(&c->bytes, extra);
      __sync_fetch_and_add(&c->extra_bytes, extra);
      if (pc) __sync_fetch_and_add(&pc->bytes, extra);
    }
  } else {
    /* Made outside a decoded allocation (or a second object of one): charged
     * as it comes, within the lease's object quota and the map's room. */
    struct tally_lease* l = 0;
    lease = current_lease(&l);
    if (!lease || !l) return 0;
    c = bpf_map_lookup_elem(&tally_charges, &lease);
    if (!c) return 0;
    if (add_within(&c->objects, 1, l->max_objects)) {
      count(&c->untracked);
      return 0;
    }
    parent = l->parent;
    struct tally_lease* pl = parent ? bpf_map_lookup_elem(&tally_leases, &parent) : 0;
    pc = pl ? bpf_map_lookup_elem(&tally_charges, &parent) : 0;
    if (!pc) parent = 0;
    /* A parent's quota holds all its children together: no lease makes
     * children to fill the map for the others. */
    if (pc && add_within(&pc->objects, 1, pl->max_objects)) {
      sub_saturating(&c->objects, 1);
      count(&c->untracked);
      return 0;
    }
    if (add_within(&t->objects, 1, tally_objects_capacity)) {
      sub_saturating(&c->objects, 1);
      if (pc) sub_saturating(&pc->objects, 1);
      count(&c->untracked);
      count(&t->untracked_full);
      return 0;
    }
    __sync_fetch_and_add(&c->bytes, size);
    if (pc) __sync_fetch_and_add(&pc->bytes, size);
  }

  struct tally_object o = {.lease = lease, .bytes = size, .parent = pc ? parent : 0};
  if (bpf_map_update_elem(&tally_objects, &key, &o, BPF_NOEXIST) != 0) {
    /* Not tracked, so never uncharged: not charged either (fdinfo's floor
     * sees it), and counted. */
    uncharge(lease, size, 1);
    if (pc) uncharge(parent, size, 1);
    return_slot();
    count(&t->insert_failed);
    count(&c->untracked);
    if (f && f->taken_by == key) f->taken_by = 0;
    return 0;
  }
  raise_peak(c);
  if (pc) raise_peak(pc);
  return 0;
}

SEC("fentry/drm_gem_object_release")
int BPF_PROG(tally_uncharge_object, struct drm_gem_object* obj) {
  if (!active()) return 0;
  __u64 key = (__u64)obj;
  struct tally_object* o = bpf_map_lookup_elem(&tally_objects, &key);
  if (!o) return 0;
  struct tally_object gone = *o;
  /* Uncharged once, by whoever deletes it. */
  if (bpf_map_delete_elem(&tally_objects, &key) != 0) return 0;
  /* The object that took its own ioctl's reservation, freed inside that
   * ioctl (a driver retrying in another domain): the reservation goes back
   * to the ioctl, still held, for the retry to take. */
  struct tally_inflight* f = inflight();
  if (f && f->taken_by == key && f->lease == gone.lease) {
    /* What it took goes back into the reservation (still counted, slot
     * and all); only what it made beyond it, and the parent's object, go. */
    __u64 extra = gone.bytes - f->taken;
    f->bytes += f->taken;
    f->slot = 1;
    f->taken_by = 0;
    f->taken = 0;
    uncharge(gone.lease, extra, 0);
    if (gone.parent) uncharge(gone.parent, extra, 0);
    return 0;
  }
  uncharge(gone.lease, gone.bytes, 1);
  if (gone.parent) uncharge(gone.parent, gone.bytes, 1);
  return_slot();
  return 0;
}

/* A refusal, counted on the lease whose bound or quota refused and sent to
 * the daemon. */
static __always_inline int refuse(__u64 lease, struct tally_charge* c, const struct tally_lease* l,
                                  __u64 bytes, unsigned int cmd, __u32 reason) {
  if (c) {
    count(&c->refused);
    __sync_fetch_and_add(&c->refused_bytes, bytes);
    if (reason != TALLY_REFUSED_BOUND) count(&c->refused_failsafe);
  }
  struct tally_refusal* r = bpf_ringbuf_reserve(&tally_refusals, sizeof(*r), 0);
  if (r) {
    r->lease = lease;
    r->requested_bytes = bytes;
    r->charged_bytes = c ? c->bytes : 0;
    r->max_bytes = l ? l->max_bytes : TALLY_UNBOUNDED;
    r->pid = bpf_get_current_pid_tgid() >> 32;
    r->cmd = cmd;
    r->reason = reason;
    r->pad = 0;
    bpf_ringbuf_submit(r, 0);
  } else {
    struct tally_totals* t = totals();
    if (t) count(&t->events_dropped);
  }
  return -ENOMEM;
}

/* Both ioctl hooks: 0 to let it pass, -ENOMEM to refuse it. `can_fault`: the
 * sleepable hook, whose read faults the argument's page in as the driver's
 * copy will; the compat hook's cannot, and a bounded lease's allocation it
 * cannot read is refused rather than passed. */
static __always_inline int refuse_crossing(struct file* file, unsigned int cmd, unsigned long arg,
                                           int can_fault) {
  if (!active()) return 0;
  settle_stale();
  /* Every ioctl on the box comes here: one whose number no decoder knows
   * leaves before the file is read. */
  if (!tally_ioctl_decodable(cmd)) return 0;
  struct inode* inode = BPF_CORE_READ(file, f_inode);
  if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFCHR) return 0;
  __u32 rdev = BPF_CORE_READ(inode, i_rdev);
  struct tally_device* d = bpf_map_lookup_elem(&tally_devices, &rdev);
  if (!d) return 0;
  __u32 kind = d->kind;

  /* The argument as the driver will see it: the caller's bytes, then zeros. */
  __u8 buf[64] = {}; /* a power of two: the mask below keeps the read inside it */
  _Static_assert(TALLY_IOCTL_MAX_ARG <= sizeof(buf), "the largest argument fits");
  __u32 need = tally_ioctl_arg_size(kind, cmd);
  __u32 given = tally_ioctl_user_bytes(kind, cmd);
  __u32 len = need;
  /* Exactly the bytes the driver copies: more could fault where its copy
   * does not. The mask never changes `given` (at most 56); it is there for
   * the verifier, which on 6.1 loses the bound the compiler derives (the
   * barrier keeps the compiler from dropping the mask as redundant). */
  barrier_var(given);
  given &= sizeof(buf) - 1;
  if (given) {
    long err = can_fault ? bpf_copy_from_user(buf, given, (const void*)arg)
                         : bpf_probe_read_user(buf, given, (const void*)arg);
    if (err) len = 0;
  }
  __u64 bytes = 0;
  enum tally_ioctl_op op = tally_ioctl_decode(kind, cmd, buf, len, &bytes);
  if (op == TALLY_IOCTL_PASS) return 0;
  if (op == TALLY_IOCTL_UNCOUNTED) {
    /* Its objects are imports, userptrs, attachments or not memory: the init
     * hook leaves them uncharged until this ioctl ends. Only a leased
     * thread's objects are charged at all, so only it needs the note (a
     * thread outside every lease never takes room in the map). */
    struct tally_lease* ul = 0;
    if (!current_lease(&ul)) return 0;
    struct tally_inflight* f = inflight_made();
    if (f) f->uncounted = 1;
    return 0;
  }
  /* Memory memcg charges (a shmem driver's dumb buffer) is MemoryMax's to
   * bound, never the GPU bound's. */
  if (kind != TALLY_DEVICE_KFD && !d->charged) return 0;

  struct tally_lease* l = 0;
  __u64 lease = current_lease(&l);
  if (!lease || !l) return 0;
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &lease);
  __u64 parent = l->parent;
  struct tally_lease* pl = parent ? bpf_map_lookup_elem(&tally_leases, &parent) : 0;
  struct tally_charge* pc = parent ? bpf_map_lookup_elem(&tally_charges, &parent) : 0;
  if (!pl || !pc) {
    parent = 0;
    pl = 0;
    pc = 0;
  }
  int bounded = l->max_bytes != TALLY_UNBOUNDED;
  int parent_bounded = pl && pl->max_bytes != TALLY_UNBOUNDED;
  /* The lease a fail-safe refusal is counted on: the child's own, else its parent's. */
  __u64 judge = bounded || !parent_bounded ? lease : parent;
  struct tally_charge* jc = bounded || !parent_bounded ? c : pc;
  struct tally_lease* jl = bounded || !parent_bounded ? l : pl;

  if (op != TALLY_IOCTL_ALLOC) { /* UNREADABLE, UNDECODABLE */
    if (!bounded && !parent_bounded) return 0;
    return refuse(judge, jc, jl, bytes, cmd,
                  op == TALLY_IOCTL_UNREADABLE ? TALLY_REFUSED_UNREADABLE
                                               : TALLY_REFUSED_UNDECODABLE);
  }
  if (!c) {
    if (!bounded && !parent_bounded) return 0;
    return refuse(judge, jc, jl, bytes, cmd, TALLY_REFUSED_CONTENDED);
  }

  struct tally_inflight* f = inflight_made();
  if (!f) {
    if (!bounded && !parent_bounded) return 0;
    return refuse(judge, jc, jl, bytes, cmd, TALLY_REFUSED_NO_MEMORY);
  }
  f->uncounted = 0;

  /* Reserve before admitting: the child's bytes, its parent's, the child's
   * object slot, the map's. Each step undone if a later one fails. */
  int why = add_within(&c->bytes, bytes, l->max_bytes);
  if (why) return refuse(lease, c, l, bytes, cmd, why);
  if (pc) {
    why = add_within(&pc->bytes, bytes, pl->max_bytes);
    if (why) {
      uncharge(lease, bytes, 0);
      return refuse(parent, pc, pl, bytes, cmd, why);
    }
  }
  /* The object slot: the child's quota, its parent's (which holds all its
   * children), the map's room. */
  why = add_within(&c->objects, 1, l->max_objects) ? TALLY_REFUSED_OBJECTS : 0;
  if (!why && pc && add_within(&pc->objects, 1, pl->max_objects)) {
    sub_saturating(&c->objects, 1);
    why = TALLY_REFUSED_OBJECTS;
  }
  if (!why) {
    struct tally_totals* t = totals();
    if (!t || add_within(&t->objects, 1, tally_objects_capacity)) {
      sub_saturating(&c->objects, 1);
      if (pc) sub_saturating(&pc->objects, 1);
      why = TALLY_REFUSED_MAP_FULL;
    }
  }
  if (why) {
    uncharge(lease, bytes, 0);
    if (pc) uncharge(parent, bytes, 0);
    /* An unbounded lease is never refused: its object goes untracked
     * (counted at init; fdinfo's floor sees it). */
    if (!bounded && !parent_bounded) return 0;
    return refuse(judge, jc, jl, bytes, cmd, why);
  }
  f->lease = lease;
  f->parent = parent;
  f->bytes = bytes;
  f->slot = 1;
  f->taken_by = 0;
  f->taken = 0;
  return 0;
}

SEC("lsm.s/file_ioctl")
int BPF_PROG(tally_refuse_crossing, struct file* file, unsigned int cmd, unsigned long arg, int ret) {
  if (ret) return ret;
  return refuse_crossing(file, cmd, arg, 1);
}

/* A 32-bit process's ioctl (compat_sys_ioctl) comes here instead of
 * file_ioctl on kernels with this hook (6.8, and the stable kernels it went
 * back to: Debian's 6.1 and 6.12 have it). DRM and KFD read it as a 64-bit
 * one (their allocation structs have one layout), so it is decided the same.
 * This hook is not sleepable: an argument it cannot read without faulting
 * is refused for a bounded lease. */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(tally_refuse_crossing_compat, struct file* file, unsigned int cmd, unsigned long arg,
             int ret) {
  if (ret) return ret;
  return refuse_crossing(file, cmd, arg, 0);
}

/* The ioctl ended: what its reservation still holds goes back, and its
 * objects are charged as usual again. */
static __always_inline int ioctl_done(long ret) {
  __u64 me = bpf_get_current_pid_tgid();
  struct tally_inflight* f = bpf_map_lookup_elem(&tally_inflight, &me);
  if (!f || !active()) return 0;
  if (ret == 0 && f->slot) keep_unseen(f);
  release_reservation(f);
  bpf_map_delete_elem(&tally_inflight, &me);
  return 0;
}

SEC("fexit/__x64_sys_ioctl")
int BPF_PROG(tally_ioctl_done, const struct pt_regs* regs, long ret) { return ioctl_done(ret); }

SEC("fexit/__ia32_compat_sys_ioctl")
int BPF_PROG(tally_ioctl_done_compat, const struct pt_regs* regs, long ret) {
  return ioctl_done(ret);
}

/* x32's ioctl (off by default: syscall.x32=y turns it on). */
SEC("fexit/__x64_compat_sys_ioctl")
int BPF_PROG(tally_ioctl_done_x32, const struct pt_regs* regs, long ret) { return ioctl_done(ret); }

/* A task moved into a lease's cgroup tree (cgroup.procs, a migration) may
 * bring buffers made outside it that only fdinfo shows: the lease's count
 * tells the daemon to walk fdinfo now. */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(tally_moved_in, struct cgroup* dst, const char* path, struct task_struct* task,
             _Bool threadgroup) {
  if (!active()) return 0;
  struct cgroup* cg = dst;
  for (int i = 0; i < TALLY_MAX_CGROUP_DEPTH && cg; i++) {
    __u64 id = BPF_CORE_READ(cg, kn, id);
    struct tally_lease* l = bpf_map_lookup_elem(&tally_leases, &id);
    if (l && !(l->flags & TALLY_LEASE_ENDED)) {
      struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &id);
      if (c) count(&c->moved_in);
    }
    struct cgroup_subsys_state* up = BPF_CORE_READ(cg, self.parent);
    cg = up ? (struct cgroup*)((char*)up - bpf_core_field_offset(struct cgroup, self)) : 0;
  }
  return 0;
}
