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
 * them, whoever holds its handles or fds by then. So
 * a lease's figure follows creation, not fd tables: no fd trick hides it and
 * a buffer passed to another lease stays its creator's.
 *
 * Refuse. The BPF LSM's file_ioctl hook (file_ioctl_compat for a 32-bit
 * process) sees every ioctl before the driver does. On a device the daemon
 * registered, the allocation ioctls it decodes (gpu_ioctl.h) are refused
 * with -ENOMEM when the lease's charge plus the request would exceed its
 * bound; the program that asked sees the driver's own out-of-memory error.
 * A child lease is refused at its own bound and at its parent's, which holds
 * all its children together. The hook also notes, per thread, ioctls whose
 * objects are not memory to charge (a PRIME import, a userptr, GDS), which
 * the init hook then leaves uncharged.
 *
 * What it cannot see is in docs/enforcement.md: objects made outside any
 * ioctl of the creating thread after such a note, memory a driver allocates
 * without a GEM object (KFD's doorbells and queues, page tables of some
 * drivers), allocations racing in threads of one lease (each may pass the
 * check before the other's object exists), and memory whose creator lease
 * has ended.
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

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, __u32);
  __type(value, struct tally_device);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_devices SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct tally_charge);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_charges SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct tally_bound);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_bounds SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1 << 20);
  __type(key, __u64);
  __type(value, struct tally_object);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_objects SEC(".maps");

/* Per thread: 1 while its current ioctl creates objects not to charge. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, __u32);
} tally_uncounted SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 * 1024);
  __uint(pinning, LIBBPF_PIN_BY_NAME);
} tally_refusals SEC(".maps");

/* The armed leases among the current task's cgroup ancestors: the innermost
 * and, when it is a child lease (the daemon nests one level: a Slurm step in
 * its job), the outermost, its parent. Walked from the root down by level
 * (the kernel keeps each cgroup's ancestors in an array), so a task nested
 * however deep under its lease is found: leases sit in the first
 * TALLY_MAX_CGROUP_DEPTH levels. */
struct tally_leases {
  __u64 inner, outer; /* 0: none; outer 0 when inner has no parent */
};

static __always_inline struct tally_leases current_leases(void) {
  struct tally_leases l = {};
  for (int level = 1; level <= TALLY_MAX_CGROUP_DEPTH; level++) {
    __u64 id = bpf_get_current_ancestor_cgroup_id(level);
    if (!id) break; /* deeper than the task's own cgroup */
    if (!bpf_map_lookup_elem(&tally_charges, &id)) continue;
    if (!l.outer) l.outer = id;
    l.inner = id;
  }
  if (l.outer == l.inner) l.outer = 0;
  return l;
}

static __always_inline void charge(__u64 lease, __u64 size) {
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &lease);
  if (!c) return;
  __u64 now = __sync_add_and_fetch(&c->bytes, size);
  __sync_fetch_and_add(&c->objects, 1);
  if (now > c->peak_bytes) c->peak_bytes = now;
}

static __always_inline void uncharge(__u64 lease, __u64 size) {
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &lease);
  if (!c) return; /* that lease ended: charged to no one since */
  __sync_fetch_and_sub(&c->bytes, size);
  __sync_fetch_and_sub(&c->objects, 1);
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
  if (!d || !d->charged) return 0;
  __u32* uncounted = bpf_task_storage_get(&tally_uncounted, bpf_get_current_task_btf(), 0, 0);
  if (uncounted && *uncounted) return 0;
  struct tally_leases l = current_leases();
  if (!l.inner) return 0;
  __u64 key = (__u64)obj;
  /* A child lease's object counts in its parent too (as memcg charges a
   * cgroup's ancestors): the parent's bound holds its children together. */
  struct tally_object o = {.lease = l.inner, .bytes = size, .parent = l.outer};
  /* Charged once: a second program (the daemon's next start, attached
   * before the old one is detached) finds the object there already. */
  if (bpf_map_update_elem(&tally_objects, &key, &o, BPF_NOEXIST) != 0) return 0;
  charge(l.inner, size);
  if (l.outer) charge(l.outer, size);
  return 0;
}

SEC("fentry/drm_gem_object_release")
int BPF_PROG(tally_uncharge_object, struct drm_gem_object* obj) {
  __u64 key = (__u64)obj;
  struct tally_object* o = bpf_map_lookup_elem(&tally_objects, &key);
  if (!o) return 0;
  __u64 lease = o->lease, parent = o->parent, bytes = o->bytes;
  /* Uncharged once, by whoever deletes it. */
  if (bpf_map_delete_elem(&tally_objects, &key) != 0) return 0;
  uncharge(lease, bytes);
  if (parent) uncharge(parent, bytes);
  return 0;
}

/* Whether `bytes` more would take `lease` past its bound; if so the refusal
 * is counted and sent to the daemon. */
static __always_inline int refuse_past_bound(__u64 lease, __u64 bytes, unsigned int cmd) {
  struct tally_bound* b = bpf_map_lookup_elem(&tally_bounds, &lease);
  if (!b) return 0;
  struct tally_charge* c = bpf_map_lookup_elem(&tally_charges, &lease);
  if (!c) return 0;
  __u64 held = c->bytes;
  if (held + bytes <= b->max_bytes && held + bytes >= held) return 0;

  __sync_fetch_and_add(&c->refused, 1);
  __sync_fetch_and_add(&c->refused_bytes, bytes);
  struct tally_refusal* r = bpf_ringbuf_reserve(&tally_refusals, sizeof(*r), 0);
  if (r) {
    r->lease = lease;
    r->requested_bytes = bytes;
    r->charged_bytes = held;
    r->max_bytes = b->max_bytes;
    r->pid = bpf_get_current_pid_tgid() >> 32;
    r->cmd = cmd;
    bpf_ringbuf_submit(r, 0);
  }
  return 1;
}

/* The init hook's note: this thread's objects, until its next ioctl, are
 * (not) to be charged. Any ioctl ends it: the objects it is for are made
 * inside the import that set it. */
static __always_inline void note_uncounted(int uncounted) {
  __u32* note = bpf_task_storage_get(&tally_uncounted, bpf_get_current_task_btf(), 0,
                                     uncounted ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
  if (note) *note = uncounted;
}

/* Both ioctl hooks: 0 to let it pass, -ENOMEM to refuse it. */
static __always_inline int refuse_crossing(struct file* file, unsigned int cmd, unsigned long arg) {
  /* Every ioctl on the box comes here: one whose number no decoder knows
   * leaves before the file is read. */
  if (!tally_ioctl_decodable(cmd)) {
    note_uncounted(0);
    return 0;
  }
  struct inode* inode = BPF_CORE_READ(file, f_inode);
  struct tally_device* d = 0;
  if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFCHR) {
    __u32 rdev = BPF_CORE_READ(inode, i_rdev);
    d = bpf_map_lookup_elem(&tally_devices, &rdev);
  }
  if (!d) {
    note_uncounted(0);
    return 0;
  }
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
  if (bpf_probe_read_user(buf, given, (const void*)arg) != 0) len = 0;
  __u64 bytes = 0;
  enum tally_ioctl_op op = tally_ioctl_decode(kind, cmd, buf, len, &bytes);
  note_uncounted(op == TALLY_IOCTL_UNCOUNTED);
  if (op != TALLY_IOCTL_ALLOC) return 0;
  /* Memory memcg charges (a shmem driver's dumb buffer) is MemoryMax's to
   * bound, never the GPU bound's. */
  if (kind != TALLY_DEVICE_KFD && !d->charged) return 0;

  struct tally_leases l = current_leases();
  if (!l.inner) return 0;
  /* The child's own bound first, then its parent's: either refuses. */
  if (refuse_past_bound(l.inner, bytes, cmd)) return -ENOMEM;
  if (l.outer && refuse_past_bound(l.outer, bytes, cmd)) return -ENOMEM;
  return 0;
}

SEC("lsm/file_ioctl")
int BPF_PROG(tally_refuse_crossing, struct file* file, unsigned int cmd, unsigned long arg, int ret) {
  if (ret) return ret;
  return refuse_crossing(file, cmd, arg);
}

/* A 32-bit process's ioctl (compat_sys_ioctl) comes here instead of
 * file_ioctl on kernels with this hook (6.8, and the stable kernels it went
 * back to: Debian's 6.1 and 6.12 have it). DRM and KFD read it as a 64-bit
 * one (their allocation structs have one layout), so it is decided the same.
 * Where the hook is absent, compat ioctls reach file_ioctl. */
SEC("lsm/file_ioctl_compat")
int BPF_PROG(tally_refuse_crossing_compat, struct file* file, unsigned int cmd, unsigned long arg,
             int ret) {
  if (ret) return ret;
  return refuse_crossing(file, cmd, arg);
}
