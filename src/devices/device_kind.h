/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Which allocation ioctls tally's kernel charge decodes on a device: the
 * kind the daemon registers each DRM and KFD node as (struct tally_device,
 * bpf/gpu_charge_abi.h), which bpf/gpu_ioctl.h's decoders switch on, and the
 * decoder a driver's row of the catalogue (devices/driver_catalogue.h) names.
 * Plain C: the BPF program includes it, and its values are the maps' bytes.
 */
#ifndef TALLY_DEVICES_DEVICE_KIND_H
#define TALLY_DEVICES_DEVICE_KIND_H

enum tally_device_kind {
  TALLY_DEVICE_OTHER_DRM = 0, /* objects charged; no allocation ioctl decoded */
  TALLY_DEVICE_AMDGPU = 1,    /* DRM_IOCTL_AMDGPU_GEM_CREATE, _GEM_USERPTR */
  TALLY_DEVICE_XE = 2,        /* DRM_IOCTL_XE_GEM_CREATE */
  TALLY_DEVICE_TESTDRM = 3,   /* the VM harness's driver as itself */
  TALLY_DEVICE_KFD = 4,       /* /dev/kfd: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU */
};

#endif
