/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tally_testdrm's private declarations: what its files share. The module,
 * tally_testdrm.ko, is built from testdrm_core.c (parameters, personalities, the
 * DRM driver's tables, the sysfs mem_info_* files, init and exit),
 * testdrm_gem.c (GEM objects and the allocation ioctls), testdrm_fdinfo.c (the
 * fdinfo keys) and testdrm_kfd.c (/dev/kfd); see testdrm_core.c for what the
 * driver is.
 */
#ifndef TALLY_TESTDRM_H
#define TALLY_TESTDRM_H

#include <linux/atomic.h>
#include <linux/container_of.h>
#include <linux/miscdevice.h>
#include <linux/types.h>
#include <linux/version.h>
#include <drm/drm_gem.h>

#include "tally_testdrm_uapi.h"

struct drm_device;
struct drm_file;
struct drm_mode_create_dumb;
struct drm_printer;
struct file;
struct seq_file;

/* drm_show_fdinfo(), drm_print_memory_stats() and drm_driver.show_fdinfo: 6.5. */
#define TESTDRM_CORE_FDINFO (LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0))

/* The module parameters the other files read (testdrm_core.c). */
extern bool testdrm_charge_memcg;
extern bool testdrm_count_unmapped;
extern atomic64_t testdrm_gtt_used;

struct testdrm_personality {
	const char *param; /* what personality= names */
	const char *name;  /* the driver name it prints */
	const char *regions[2]; /* NULL: the driver has no such region */
	bool silent;       /* allocates, but prints no memory key */
};

/* The personality played, chosen at load (testdrm_core.c). */
extern const struct testdrm_personality *testdrm_played;

/* Refuse absurd sizes before allocating a page array for them: the driver's
 * own CREATE with EINVAL, the real drivers' allocations with ENOMEM (their
 * memory managers are this big). */
#define TESTDRM_MAX_BYTES (4ULL << 30)

struct testdrm_bo {
	struct drm_gem_object base;
	u32 region;
	bool mapped;
	/* Shown in fdinfo. False for the objects of no pages: on-chip resources
	 * (amdgpu GDS/GWS/OA/DOORBELL), userptrs, doorbells, attachments. */
	bool counted;
	/* An attachment's original (a dma-buf import or an SG BO holds a reference
	 * to the BO whose memory it maps: bo->parent in create_dmamap_sg_bo()). */
	struct drm_gem_object *parent;
	unsigned long npages;
	struct page **pages;
};

static inline struct testdrm_bo *to_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct testdrm_bo, base);
}

/* testdrm_gem.c */
extern const struct drm_gem_object_funcs testdrm_bo_funcs;
bool testdrm_region_ok(u32 region);
struct drm_gem_object *testdrm_bo_new_nopages(struct drm_device *dev, u32 region,
					      u64 size, struct drm_gem_object *parent);
struct drm_gem_object *testdrm_bo_new_pages(struct drm_device *dev, u32 region, u64 size);
int testdrm_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int testdrm_amdgpu_gem_create_ioctl(struct drm_device *dev, void *data,
				    struct drm_file *file);
int testdrm_dumb_create(struct drm_file *file, struct drm_device *dev,
			struct drm_mode_create_dumb *args);
int testdrm_map_or_xe_gem_create_ioctl(struct drm_device *dev, void *data,
				       struct drm_file *file);
/* Command 0x01: this driver's MAP or xe's GEM_CREATE, one table entry (see
 * testdrm_map_or_xe_gem_create_ioctl() in testdrm_gem.c). */
#define DRM_IOCTL_TALLY_TESTDRM_MAP_OR_XE_GEM_CREATE DRM_IOCTL_TALLY_TESTDRM_XE_GEM_CREATE
#define DRM_TALLY_TESTDRM_MAP_OR_XE_GEM_CREATE DRM_TALLY_TESTDRM_MAP

/* testdrm_fdinfo.c */
#if TESTDRM_CORE_FDINFO
void testdrm_show_fdinfo(struct drm_printer *p, struct drm_file *file);
#else
int testdrm_open(struct drm_device *dev, struct drm_file *file);
void testdrm_fops_show_fdinfo(struct seq_file *m, struct file *f);
#endif

/* testdrm_core.c: the DRM device, for /dev/kfd's buffers. */
extern struct drm_device *testdrm_drm;

/* testdrm_kfd.c: /dev/kfd, registered at load with personality=amdgpu. */
extern struct miscdevice testdrm_kfd_misc;

#endif /* TALLY_TESTDRM_H */
