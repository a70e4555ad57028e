// SPDX-License-Identifier: GPL-2.0
/*
 * tally_testdrm: a minimal GEM driver for tally's VM tests.
 *
 * Buffers live in one of two named regions ("gtt", "vram"); the DRM core prints
 * their totals through drm_show_fdinfo() exactly as it does for amdgpu. Pages come
 * from alloc_page(): with charge_memcg=0 (today's amdgpu GTT) they are not charged
 * to any memory cgroup; with charge_memcg=1 (a kernel that charges GTT) they carry
 * __GFP_ACCOUNT and count in the allocating task's memory.current.
 * The parameter is read at allocation time, so a test may flip it between buffers
 * through /sys/module/tally_testdrm/parameters/charge_memcg.
 */
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_print.h>

#include "tally_testdrm_uapi.h"

static bool charge_memcg;
module_param(charge_memcg, bool, 0644);
MODULE_PARM_DESC(charge_memcg, "charge buffer pages to the allocator's memory cgroup");

/* Refuse absurd sizes before allocating a page array for them. */
#define TESTDRM_MAX_BYTES (4ULL << 30)

struct testdrm_bo {
	struct drm_gem_object base;
	u32 region;
	unsigned long npages;
	struct page **pages;
};

static struct testdrm_bo *to_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct testdrm_bo, base);
}

static void testdrm_bo_free(struct drm_gem_object *obj)
{
	struct testdrm_bo *bo = to_bo(obj);
	unsigned long i;

	for (i = 0; i < bo->npages; i++)
		if (bo->pages[i])
			__free_page(bo->pages[i]);
	kvfree(bo->pages);
	drm_gem_object_release(obj);
	kfree(bo);
}

static const struct drm_gem_object_funcs testdrm_bo_funcs = {
	.free = testdrm_bo_free,
};

static int testdrm_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct tally_testdrm_create *args = data;
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN | __GFP_ZERO;
	struct testdrm_bo *bo;
	unsigned long i;
	int ret;

	if (args->region > TALLY_TESTDRM_REGION_VRAM)
		return -EINVAL;
	if (args->size == 0 || args->size > TESTDRM_MAX_BYTES)
		return -EINVAL;
	if (READ_ONCE(charge_memcg))
		gfp |= __GFP_ACCOUNT;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return -ENOMEM;
	bo->region = args->region;
	bo->base.funcs = &testdrm_bo_funcs;
	drm_gem_private_object_init(dev, &bo->base, PAGE_ALIGN(args->size));
	bo->npages = bo->base.size >> PAGE_SHIFT;
	bo->pages = kvcalloc(bo->npages, sizeof(*bo->pages), GFP_KERNEL);
	if (!bo->pages) {
		bo->npages = 0;
		ret = -ENOMEM;
		goto put;
	}
	for (i = 0; i < bo->npages; i++) {
		bo->pages[i] = alloc_page(gfp);
		if (!bo->pages[i]) {
			ret = -ENOMEM;
			goto put;
		}
		cond_resched();
	}
	ret = drm_gem_handle_create(file, &bo->base, &args->handle);
put:
	/* On success the handle holds the reference; on failure this frees the bo. */
	drm_gem_object_put(&bo->base);
	return ret;
}

static void testdrm_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct drm_memory_stats stats[2] = {};
	static const char *const names[2] = { "gtt", "vram" };
	struct drm_gem_object *obj;
	int id, r;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		struct testdrm_bo *bo;

		if (obj->funcs != &testdrm_bo_funcs)
			continue;
		bo = to_bo(obj);
		if (obj->handle_count > 1)
			stats[bo->region].shared += obj->size;
		else
			stats[bo->region].private += obj->size;
		stats[bo->region].resident += obj->size;
	}
	spin_unlock(&file->table_lock);

	for (r = 0; r < 2; r++)
		drm_print_memory_stats(p, &stats[r], DRM_GEM_OBJECT_RESIDENT, names[r]);
}

static const struct drm_ioctl_desc testdrm_ioctls[] = {
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_CREATE, testdrm_create_ioctl, DRM_RENDER_ALLOW),
};

static const struct file_operations testdrm_fops = {
	.owner = THIS_MODULE,
	DRM_GEM_FOPS,
	.show_fdinfo = drm_show_fdinfo,
};

static const struct drm_driver testdrm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	.fops = &testdrm_fops,
	.ioctls = testdrm_ioctls,
	.num_ioctls = ARRAY_SIZE(testdrm_ioctls),
	.show_fdinfo = testdrm_show_fdinfo,
	.name = "tally_testdrm",
	.desc = "tally test DRM driver",
	.major = 1,
	.minor = 0,
};

static struct platform_device *testdrm_pdev;
static struct drm_device *testdrm_drm;

static int __init testdrm_init(void)
{
	int ret;

	testdrm_pdev = platform_device_register_simple("tally_testdrm", -1, NULL, 0);
	if (IS_ERR(testdrm_pdev))
		return PTR_ERR(testdrm_pdev);
	testdrm_drm = drm_dev_alloc(&testdrm_driver, &testdrm_pdev->dev);
	if (IS_ERR(testdrm_drm)) {
		ret = PTR_ERR(testdrm_drm);
		goto unregister_pdev;
	}
	ret = drm_dev_register(testdrm_drm, 0);
	if (ret)
		goto put_drm;
	return 0;
put_drm:
	drm_dev_put(testdrm_drm);
unregister_pdev:
	platform_device_unregister(testdrm_pdev);
	return ret;
}

static void __exit testdrm_exit(void)
{
	drm_dev_unregister(testdrm_drm);
	drm_dev_put(testdrm_drm);
	platform_device_unregister(testdrm_pdev);
}

module_init(testdrm_init);
module_exit(testdrm_exit);
MODULE_DESCRIPTION("tally test DRM driver: fdinfo regions gtt/vram, optional memcg charging");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(DMA_BUF);
