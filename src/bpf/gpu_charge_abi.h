/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What tally's in-kernel GPU memory charge (gpu_charge.bpf.c) and the daemon
 * (bpf/kernel_charge.h) share: the maps' keys and values and the refusal
 * event. Plain C with fixed-width fields: the same bytes on both sides.
 *
 * A lease is keyed by its cgroup's id (the cgroup directory's inode number,
 * what bpf_get_current_cgroup_id() and the kernfs node give): stable across
 * a daemon restart, unique while the cgroup exists.
 */
#ifndef TALLY_BPF_GPU_CHARGE_ABI_H
#define TALLY_BPF_GPU_CHARGE_ABI_H

#include <linux/types.h>

/* The devices whose allocations are decoded and whose objects are charged.
 * Key: the character device number as the kernel holds it (MAJOR << 20 |
 * MINOR, inode->i_rdev and device->devt), for every card, render and KFD
 * node the daemon registered. */
enum tally_device_kind {
  TALLY_DEVICE_OTHER_DRM = 0, /* objects charged; no allocation ioctl decoded */
  TALLY_DEVICE_AMDGPU = 1,    /* DRM_IOCTL_AMDGPU_GEM_CREATE, _GEM_USERPTR */
  TALLY_DEVICE_XE = 2,        /* DRM_IOCTL_XE_GEM_CREATE */
  TALLY_DEVICE_TESTDRM = 3,   /* the VM harness's driver as itself */
  TALLY_DEVICE_KFD = 4,       /* /dev/kfd: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU */
};

struct tally_device {
  __u32 kind;    /* enum tally_device_kind */
  __u32 charged; /* 1: the driver's objects are memory memcg does not see (TTM: amdgpu, xe, ...) */
};

/* Per lease: its bound (absent: no bound, never refused). Written by the daemon only. */
struct tally_bound {
  __u64 max_bytes;
};

/* Per lease: what the kernel charged it. Created (zero) by the daemon when it
 * arms the lease; its counters are written by the programs only. */
struct tally_charge {
  __u64 bytes;         /* held now: objects created in the lease and not yet freed */
  __u64 peak_bytes;    /* the most it held at once since armed */
  __u64 objects;       /* objects held now */
  __u64 refused;       /* allocations refused */
  __u64 refused_bytes; /* bytes those asked for */
};

/* One charged object: whose, and how much. Key: the object's address. */
struct tally_object {
  __u64 lease;
  __u64 bytes;
  __u64 parent; /* the lease's parent lease, charged too; 0: none */
};

/* One refusal, as the ring buffer carries it. */
struct tally_refusal {
  __u64 lease;
  __u64 requested_bytes;
  __u64 charged_bytes; /* the lease's charge when it asked */
  __u64 max_bytes;
  __u32 pid; /* the thread group that asked */
  __u32 cmd; /* the ioctl */
};

/* The cgroup levels the lease lookup walks from the root (tally's leases sit
 * a few levels down; a task below them is found at any depth). */
#define TALLY_MAX_CGROUP_DEPTH 64

#endif
