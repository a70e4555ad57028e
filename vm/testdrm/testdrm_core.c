// SPDX-License-Identifier: GPL-2.0
/*
 * tally_testdrm: a minimal GEM driver for tally's VM tests.
 *
 * Buffers live in one of two regions; the DRM core prints their totals through
 * drm_show_fdinfo() exactly as it does for a real driver (on kernels before 6.5,
 * which have no such helper, the driver prints the keys itself in the format
 * amdgpu used then). Pages come from alloc_page(): with charge_memcg=0 (today's
 * amdgpu GTT) they are not charged to any memory cgroup; with charge_memcg=1 (a
 * kernel that charges GTT, or a shmem-backed driver) they carry __GFP_ACCOUNT and
 * count in the allocating task's memory.current. The parameter is read at
 * allocation time, so a test may flip it between buffers through
 * /sys/module/tally_testdrm/parameters/charge_memcg.
 *
 * personality= (at load) makes it print another driver's name and region names,
 * so tally's per-driver memory classes are exercised on a real kernel:
 *   tally_testdrm, amdgpu  gtt, vram
 *   xe                     gtt, vram0
 *   i915                   system0 (an integrated part: no second region)
 *   i915-discrete          system0, local0, printed as i915 (a DG1/DG2)
 *   v3d                    memory (no second region)
 *   nouveau                gtt, vram allocated, no memory key printed (as nouveau,
 *                          virtio_gpu and vmwgfx: drm-driver and client id only)
 * count_unmapped=0 counts a buffer only once mapped (TALLY_TESTDRM_MAP), as amdgpu
 * did before its runtime-stats rework: an unmapped buffer is on no VM list.
 *
 * Allocation ioctls, with the encodings of the drivers it plays (tally's
 * kernel charge decodes them): its own CREATE, amdgpu's GEM_CREATE (union
 * drm_amdgpu_gem_create), xe's GEM_CREATE with personality=xe and, with
 * personality=amdgpu, /dev/kfd answering KFD's ALLOC_MEMORY_OF_GPU,
 * FREE_MEMORY_OF_GPU, MAP_MEMORY_TO_GPU and UNMAP_MEMORY_FROM_GPU with their
 * real structs. Where tally's tests lean on the real driver's decisions (which
 * flags make memory, which make an object of no pages, what is refused, which
 * further objects a map creates), the handlers mirror them, each naming the
 * kernel function it follows (checked against Debian's 6.1.192, 6.12.118 and
 * 7.3.4 sources; where they differ, the newest).
 *
 * Every object, with pages or without, is a GEM object initialised by
 * drm_gem_private_object_init() and released by drm_gem_object_release(), as
 * amdgpu_bo_create()'s are: what tally's kernel charge hooks.
 *
 * This file holds the module's parameters, the personalities, the DRM
 * driver's tables, the platform device's sysfs mem_info_* files and init/exit;
 * the GEM objects and allocation ioctls are in testdrm_gem.c, the fdinfo keys
 * in testdrm_fdinfo.c and /dev/kfd in testdrm_kfd.c (split at these seams to
 * keep each file under 600 lines), their shared declarations in testdrm.h.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/platform_device.h>
#include <linux/string.h>
#include <linux/version.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_print.h>

#include "tally_testdrm_uapi.h"
#include "testdrm.h"

bool testdrm_charge_memcg;
module_param_named(charge_memcg, testdrm_charge_memcg, bool, 0644);
MODULE_PARM_DESC(charge_memcg, "charge buffer pages to the allocator's memory cgroup");

bool testdrm_count_unmapped = true;
module_param_named(count_unmapped, testdrm_count_unmapped, bool, 0644);
MODULE_PARM_DESC(count_unmapped, "show unmapped buffers in fdinfo (0: only mapped ones, as amdgpu before ~6.14)");

/* amdgpu's mem_info_gtt_total/_used (amdgpu_gtt_mgr.c) on the platform device,
 * for the daemon's measured headroom: 0 (the default) exports none (reading
 * either file fails, as on a driver without them); set at load or at run time.
 * _used is the GTT buffers this driver holds now, counted bytes (no pages
 * held: on-chip resources, userptrs, attachments), as amdgpu's manager counts
 * what it placed. */
static unsigned long long mem_info_gtt_total;
module_param(mem_info_gtt_total, ullong, 0644);
MODULE_PARM_DESC(mem_info_gtt_total, "export mem_info_gtt_total (bytes) and _used; 0: none");
atomic64_t testdrm_gtt_used = ATOMIC64_INIT(0);

static char *personality = "tally_testdrm";
module_param(personality, charp, 0444);
MODULE_PARM_DESC(personality,
		 "the driver to play: tally_testdrm, amdgpu, xe, i915, i915-discrete, v3d, nouveau");

static const struct testdrm_personality personalities[] = {
	{ "tally_testdrm", "tally_testdrm", { "gtt", "vram" }, false },
	{ "amdgpu", "amdgpu", { "gtt", "vram" }, false },
	{ "xe", "xe", { "gtt", "vram0" }, false },
	{ "i915", "i915", { "system0", NULL }, false },
	{ "i915-discrete", "i915", { "system0", "local0" }, false },
	{ "v3d", "v3d", { "memory", NULL }, false },
	{ "nouveau", "nouveau", { "gtt", "vram" }, true },
};

const struct testdrm_personality *testdrm_played;
static char played_name[32]; /* drm_driver.name is not const on every kernel */

static const struct drm_ioctl_desc testdrm_ioctls[] = {
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_AMDGPU_GEM_CREATE, testdrm_amdgpu_gem_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_MAP_OR_XE_GEM_CREATE, testdrm_map_or_xe_gem_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_CREATE, testdrm_create_ioctl, DRM_RENDER_ALLOW),
};

static const struct file_operations testdrm_fops = {
	.owner = THIS_MODULE,
	DRM_GEM_FOPS,
#if TESTDRM_CORE_FDINFO
	.show_fdinfo = drm_show_fdinfo,
#else
	.show_fdinfo = testdrm_fops_show_fdinfo,
#endif
};

/* Not const: its name is the personality's, set at load. */
static struct drm_driver testdrm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	.fops = &testdrm_fops,
	.dumb_create = testdrm_dumb_create,
	.ioctls = testdrm_ioctls,
	.num_ioctls = ARRAY_SIZE(testdrm_ioctls),
#if TESTDRM_CORE_FDINFO
	.show_fdinfo = testdrm_show_fdinfo,
#else
	.open = testdrm_open,
#endif
	.name = "tally_testdrm",
	.desc = "tally test DRM driver",
	.major = 1,
	.minor = 0,
};

static struct platform_device *testdrm_pdev;
struct drm_device *testdrm_drm;

static ssize_t mem_info_gtt_total_show(struct device *dev, struct device_attribute *attr,
				       char *buf)
{
	if (!mem_info_gtt_total)
		return -ENODATA;
	return sysfs_emit(buf, "%llu\n", mem_info_gtt_total);
}

static ssize_t mem_info_gtt_used_show(struct device *dev, struct device_attribute *attr,
				      char *buf)
{
	if (!mem_info_gtt_total)
		return -ENODATA;
	return sysfs_emit(buf, "%lld\n", (long long)atomic64_read(&testdrm_gtt_used));
}

static DEVICE_ATTR_RO(mem_info_gtt_total);
static DEVICE_ATTR_RO(mem_info_gtt_used);

static bool testkfd_registered;

static int __init testdrm_init(void)
{
	size_t i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(personalities); i++)
		if (!strcmp(personality, personalities[i].param))
			testdrm_played = &personalities[i];
	if (!testdrm_played) {
		pr_err("tally_testdrm: unknown personality '%s'\n", personality);
		return -EINVAL;
	}
	strscpy(played_name, testdrm_played->name, sizeof(played_name));
	testdrm_driver.name = played_name;

	testdrm_pdev = platform_device_register_simple("tally_testdrm", -1, NULL, 0);
	if (IS_ERR(testdrm_pdev))
		return PTR_ERR(testdrm_pdev);
	ret = device_create_file(&testdrm_pdev->dev, &dev_attr_mem_info_gtt_total);
	if (!ret)
		ret = device_create_file(&testdrm_pdev->dev, &dev_attr_mem_info_gtt_used);
	if (ret)
		goto unregister_pdev;
	testdrm_drm = drm_dev_alloc(&testdrm_driver, &testdrm_pdev->dev);
	if (IS_ERR(testdrm_drm)) {
		ret = PTR_ERR(testdrm_drm);
		goto unregister_pdev;
	}
	ret = drm_dev_register(testdrm_drm, 0);
	if (ret)
		goto put_drm;
	if (!strcmp(testdrm_played->param, "amdgpu")) {
		ret = misc_register(&testdrm_kfd_misc);
		if (ret)
			goto unregister_drm;
		testkfd_registered = true;
	}
	return 0;
unregister_drm:
	drm_dev_unregister(testdrm_drm);
put_drm:
	drm_dev_put(testdrm_drm);
unregister_pdev:
	platform_device_unregister(testdrm_pdev);
	return ret;
}

static void __exit testdrm_exit(void)
{
	if (testkfd_registered)
		misc_deregister(&testdrm_kfd_misc);
	drm_dev_unregister(testdrm_drm);
	drm_dev_put(testdrm_drm);
	platform_device_unregister(testdrm_pdev);
}

module_init(testdrm_init);
module_exit(testdrm_exit);
MODULE_DESCRIPTION("tally test DRM driver: fdinfo regions of several drivers, optional memcg charging");
MODULE_LICENSE("GPL");
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
MODULE_IMPORT_NS("DMA_BUF");
#else
MODULE_IMPORT_NS(DMA_BUF);
#endif
