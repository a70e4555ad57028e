/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The few kernel types gpu_charge.bpf.c reads, declared with only the fields
 * it uses. preserve_access_index makes every access a CO-RE relocation:
 * libbpf finds each field by name in the running kernel's BTF
 * (/sys/kernel/btf/vmlinux) at load, so one object runs on 6.1, 6.12 and
 * 7.x whatever the layouts, and a field a kernel lacks fails the load
 * (said by the daemon) instead of reading the wrong bytes. A generated
 * vmlinux.h would carry one kernel's 100,000 types for these ten fields.
 */
#ifndef TALLY_BPF_KERNEL_TYPES_H
#define TALLY_BPF_KERNEL_TYPES_H

#include <linux/types.h>

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct kernfs_node {
  __u64 id;
};

struct cgroup_subsys_state {
  struct cgroup_subsys_state* parent;
};

/* `self` is cgroup's first member: its css is the cgroup's address. */
struct cgroup {
  struct cgroup_subsys_state self;
  struct kernfs_node* kn;
};

struct css_set {
  struct cgroup* dfl_cgrp;
};

struct task_struct {
  struct css_set* cgroups;
  int tgid;
};

struct device {
  __u32 devt;
};

struct drm_minor {
  struct device* kdev;
};

struct drm_device {
  struct drm_minor* primary;
  struct drm_minor* render;
};

struct drm_gem_object {
  struct drm_device* dev;
  __u64 size;
};

struct inode {
  __u16 i_mode;
  __u32 i_rdev;
};

struct file {
  struct inode* f_inode;
};

#pragma clang attribute pop

/* Only passed along (the ioctl syscall's fexit): never read. */
struct pt_regs;

#endif
