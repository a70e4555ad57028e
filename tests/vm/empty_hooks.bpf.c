// SPDX-License-Identifier: GPL-2.0
/*
 * The floor under tally's kernel charge (src/bpf/gpu_charge.bpf.c): three
 * programs at the same hooks that do nothing. What a create/close pair costs
 * with these attached is what any program there costs before it runs a line
 * (the trampolines, the LSM's dispatch): the bench
 * (VmKernelCharge.Bench...) times it beside the real programs.
 */
#include "bpf/kernel_types.h"

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("fentry/drm_gem_private_object_init")
int BPF_PROG(empty_object_init, struct drm_device* dev, struct drm_gem_object* obj, __u64 size) {
  return 0;
}

SEC("fentry/drm_gem_object_release")
int BPF_PROG(empty_object_release, struct drm_gem_object* obj) { return 0; }

SEC("lsm.s/file_ioctl")
int BPF_PROG(empty_file_ioctl, struct file* file, unsigned int cmd, unsigned long arg, int ret) {
  return ret;
}

SEC("fexit/__x64_sys_ioctl")
int BPF_PROG(empty_ioctl_done, const struct pt_regs* regs, long ret) { return 0; }
