// SPDX-License-Identifier: GPL-2.0
/*
 * tally's kernel charge and bound (docs/enforcement.md, "In the
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

/* The maps, the counters, the leases and reservations (one object: these
 * headers are gpu_charge.bpf.c's alone). */
#include "bpf/gpu_charge_maps.bpf.h"
#include "bpf/gpu_charge_counters.bpf.h"
#include "bpf/gpu_charge_reservations.bpf.h"

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
