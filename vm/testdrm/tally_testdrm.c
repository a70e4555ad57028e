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
 * in-kernel charge decodes them): its own CREATE, amdgpu's GEM_CREATE (union
 * drm_amdgpu_gem_create) and, with personality=amdgpu, /dev/kfd answering
 * KFD's ALLOC_MEMORY_OF_GPU / FREE_MEMORY_OF_GPU with their real structs.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/seq_file.h>
#include <linux/version.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_print.h>

#include "tally_testdrm_uapi.h"

/* drm_show_fdinfo(), drm_print_memory_stats() and drm_driver.show_fdinfo: 6.5. */
#define TESTDRM_CORE_FDINFO (LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0))

static bool charge_memcg;
module_param(charge_memcg, bool, 0644);
MODULE_PARM_DESC(charge_memcg, "charge buffer pages to the allocator's memory cgroup");

static bool count_unmapped = true;
module_param(count_unmapped, bool, 0644);
MODULE_PARM_DESC(count_unmapped, "show unmapped buffers in fdinfo (0: only mapped ones, as amdgpu before ~6.14)");

static char *personality = "tally_testdrm";
module_param(personality, charp, 0444);
MODULE_PARM_DESC(personality,
		 "the driver to play: tally_testdrm, amdgpu, xe, i915, i915-discrete, v3d, nouveau");

struct testdrm_personality {
	const char *param; /* what personality= names */
	const char *name;  /* the driver name it prints */
	const char *regions[2]; /* NULL: the driver has no such region */
	bool silent;       /* allocates, but prints no memory key */
};

static const struct testdrm_personality personalities[] = {
	{ "tally_testdrm", "tally_testdrm", { "gtt", "vram" }, false },
	{ "amdgpu", "amdgpu", { "gtt", "vram" }, false },
	{ "xe", "xe", { "gtt", "vram0" }, false },
	{ "i915", "i915", { "system0", NULL }, false },
	{ "i915-discrete", "i915", { "system0", "local0" }, false },
	{ "v3d", "v3d", { "memory", NULL }, false },
	{ "nouveau", "nouveau", { "gtt", "vram" }, true },
};

static const struct testdrm_personality *played;
static char played_name[32]; /* drm_driver.name is not const on every kernel */

/* Refuse absurd sizes before allocating a page array for them. */
#define TESTDRM_MAX_BYTES (4ULL << 30)

struct testdrm_bo {
	struct drm_gem_object base;
	u32 region;
	bool mapped;
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

/* A buffer object with all its pages, holding one reference (the caller's);
 * initialised through drm_gem_private_object_init() as every driver's are. */
static struct drm_gem_object *testdrm_bo_new(struct drm_device *dev, u32 region, u64 size)
{
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN | __GFP_ZERO;
	struct testdrm_bo *bo;
	unsigned long i;

	if (region > TALLY_TESTDRM_REGION_VRAM || !played->regions[region])
		return ERR_PTR(-EINVAL);
	if (size == 0 || size > TESTDRM_MAX_BYTES)
		return ERR_PTR(-EINVAL);
	if (READ_ONCE(charge_memcg))
		gfp |= __GFP_ACCOUNT;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	bo->region = region;
	bo->base.funcs = &testdrm_bo_funcs;
	drm_gem_private_object_init(dev, &bo->base, PAGE_ALIGN(size));
	bo->npages = bo->base.size >> PAGE_SHIFT;
	bo->pages = kvcalloc(bo->npages, sizeof(*bo->pages), GFP_KERNEL);
	if (!bo->pages) {
		bo->npages = 0;
		goto fail;
	}
	for (i = 0; i < bo->npages; i++) {
		bo->pages[i] = alloc_page(gfp);
		if (!bo->pages[i])
			goto fail;
		cond_resched();
	}
	return &bo->base;
fail:
	drm_gem_object_put(&bo->base); /* frees it */
	return ERR_PTR(-ENOMEM);
}

static int testdrm_handle_new(struct drm_device *dev, struct drm_file *file, u32 region,
			      u64 size, u32 *handle)
{
	struct drm_gem_object *obj = testdrm_bo_new(dev, region, size);
	int ret;

	if (IS_ERR(obj))
		return PTR_ERR(obj);
	ret = drm_gem_handle_create(file, obj, handle);
	/* On success the handle holds the reference; on failure this frees the bo. */
	drm_gem_object_put(obj);
	return ret;
}

static int testdrm_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct tally_testdrm_create *args = data;

	return testdrm_handle_new(dev, file, args->region, args->size, &args->handle);
}

static int testdrm_amdgpu_gem_create_ioctl(struct drm_device *dev, void *data,
					   struct drm_file *file)
{
	union tally_testdrm_amdgpu_gem_create *args = data;
	u64 domains = args->in.domains, size = args->in.bo_size;
	u32 region, handle;
	int ret;

	if (domains & TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM)
		region = TALLY_TESTDRM_REGION_VRAM;
	else if (domains & TALLY_TESTDRM_AMDGPU_DOMAIN_GTT)
		region = TALLY_TESTDRM_REGION_GTT;
	else
		return -EINVAL;
	ret = testdrm_handle_new(dev, file, region, size, &handle);
	if (ret)
		return ret;
	memset(args, 0, sizeof(*args));
	args->out.handle = handle;
	return 0;
}

/* A dumb buffer (DRM_IOCTL_MODE_CREATE_DUMB on the card node, which any
 * client may ask for): pitch by the width, GTT-like pages, as a KMS driver
 * makes one. */
static int testdrm_dumb_create(struct drm_file *file, struct drm_device *dev,
			       struct drm_mode_create_dumb *args)
{
	args->pitch = args->width * DIV_ROUND_UP(args->bpp, 8);
	args->size = PAGE_ALIGN((u64)args->pitch * args->height);
	return testdrm_handle_new(dev, file, TALLY_TESTDRM_REGION_GTT, args->size, &args->handle);
}

static int testdrm_map_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct tally_testdrm_map *args = data;
	struct drm_gem_object *obj = drm_gem_object_lookup(file, args->handle);

	if (!obj)
		return -ENOENT;
	if (obj->funcs == &testdrm_bo_funcs)
		WRITE_ONCE(to_bo(obj)->mapped, true);
	drm_gem_object_put(obj);
	return 0;
}

struct testdrm_stats {
	u64 shared, private, resident;
};

/* Per region, what the client's buffers hold (mapped ones only when asked). */
static void testdrm_collect(struct drm_file *file, struct testdrm_stats stats[2])
{
	bool unmapped_too = READ_ONCE(count_unmapped);
	struct drm_gem_object *obj;
	int id;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		struct testdrm_bo *bo;

		if (obj->funcs != &testdrm_bo_funcs)
			continue;
		bo = to_bo(obj);
		if (!unmapped_too && !READ_ONCE(bo->mapped))
			continue;
		if (obj->handle_count > 1)
			stats[bo->region].shared += obj->size;
		else
			stats[bo->region].private += obj->size;
		stats[bo->region].resident += obj->size;
	}
	spin_unlock(&file->table_lock);
}

#if TESTDRM_CORE_FDINFO
static void testdrm_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct testdrm_stats stats[2] = {};
	int r;

	if (played->silent)
		return;
	testdrm_collect(file, stats);
	for (r = 0; r < 2; r++) {
		struct drm_memory_stats s = {
			.shared = stats[r].shared,
			.private = stats[r].private,
			.resident = stats[r].resident,
		};

		if (played->regions[r])
			drm_print_memory_stats(p, &s, DRM_GEM_OBJECT_RESIDENT, played->regions[r]);
	}
}
#else
/* Before 6.5 every driver printed its own keys; amdgpu printed these. */
static atomic64_t testdrm_client_ids = ATOMIC64_INIT(0);

static int testdrm_open(struct drm_device *dev, struct drm_file *file)
{
	file->driver_priv = (void *)(uintptr_t)atomic64_inc_return(&testdrm_client_ids);
	return 0;
}

static void testdrm_fops_show_fdinfo(struct seq_file *m, struct file *f)
{
	struct drm_file *file = f->private_data;
	struct testdrm_stats stats[2] = {};
	int r;

	testdrm_collect(file, stats);
	seq_printf(m, "drm-driver:\t%s\n", played->name);
	seq_printf(m, "drm-client-id:\t%llu\n", (u64)(uintptr_t)file->driver_priv);
	if (played->silent)
		return;
	for (r = 0; r < 2; r++) {
		const char *name = played->regions[r];
		u64 total = stats[r].shared + stats[r].private;

		if (!name)
			continue;
		if (!strcmp(played->name, "amdgpu") || !strcmp(played->name, "tally_testdrm")) {
			seq_printf(m, "drm-memory-%s: \t%llu KiB\n", name, total / 1024);
			continue;
		}
		seq_printf(m, "drm-total-%s:\t%llu KiB\n", name, total / 1024);
		seq_printf(m, "drm-shared-%s:\t%llu KiB\n", name, stats[r].shared / 1024);
		seq_printf(m, "drm-resident-%s:\t%llu KiB\n", name, stats[r].resident / 1024);
	}
}
#endif

static const struct drm_ioctl_desc testdrm_ioctls[] = {
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_AMDGPU_GEM_CREATE, testdrm_amdgpu_gem_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TALLY_TESTDRM_MAP, testdrm_map_ioctl, DRM_RENDER_ALLOW),
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
static struct drm_device *testdrm_drm;

/* /dev/kfd (personality=amdgpu): each open file holds its buffers by handle. */
struct testkfd_file {
	struct xarray bos;
};

static int testkfd_open(struct inode *inode, struct file *f)
{
	struct testkfd_file *ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);

	if (!ctx)
		return -ENOMEM;
	xa_init_flags(&ctx->bos, XA_FLAGS_ALLOC1);
	f->private_data = ctx;
	return 0;
}

static int testkfd_release(struct inode *inode, struct file *f)
{
	struct testkfd_file *ctx = f->private_data;
	struct drm_gem_object *obj;
	unsigned long id;

	xa_for_each(&ctx->bos, id, obj)
		drm_gem_object_put(obj);
	xa_destroy(&ctx->bos);
	kfree(ctx);
	return 0;
}

/* As kfd_ioctl() reads a command: by its number alone, the caller's first
 * _IOC_SIZE(cmd) bytes, the rest of the struct zero. */
static int testkfd_copy_in(void *kdata, size_t size, unsigned int cmd, void __user *uarg)
{
	size_t usize = min_t(size_t, _IOC_SIZE(cmd), size);

	memset(kdata, 0, size);
	return copy_from_user(kdata, uarg, usize) ? -EFAULT : 0;
}

static long testkfd_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct testkfd_file *ctx = f->private_data;
	void __user *uarg = (void __user *)arg;

	if (_IOC_NR(cmd) == _IOC_NR(AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU)) {
		struct tally_testkfd_alloc_memory_of_gpu a;
		struct drm_gem_object *obj;
		u32 region, id;
		int ret;

		if (testkfd_copy_in(&a, sizeof(a), cmd, uarg))
			return -EFAULT;
		if (a.flags & TALLY_TESTKFD_ALLOC_VRAM)
			region = TALLY_TESTDRM_REGION_VRAM;
		else if (a.flags & TALLY_TESTKFD_ALLOC_GTT)
			region = TALLY_TESTDRM_REGION_GTT;
		else
			return -EINVAL;
		obj = testdrm_bo_new(testdrm_drm, region, a.size);
		if (IS_ERR(obj))
			return PTR_ERR(obj);
		ret = xa_alloc(&ctx->bos, &id, obj, xa_limit_32b, GFP_KERNEL);
		if (ret) {
			drm_gem_object_put(obj);
			return ret;
		}
		a.handle = id;
		if (copy_to_user(uarg, &a, min_t(size_t, _IOC_SIZE(cmd), sizeof(a))))
			return -EFAULT; /* the buffer stays until the file closes */
		return 0;
	}
	if (_IOC_NR(cmd) == _IOC_NR(AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU)) {
		struct tally_testkfd_free_memory_of_gpu a;
		struct drm_gem_object *obj;

		if (testkfd_copy_in(&a, sizeof(a), cmd, uarg))
			return -EFAULT;
		obj = a.handle <= U32_MAX ? xa_erase(&ctx->bos, (unsigned long)a.handle) : NULL;
		if (!obj)
			return -EINVAL;
		drm_gem_object_put(obj);
		return 0;
	}
	return -ENOTTY;
}

static const struct file_operations testkfd_fops = {
	.owner = THIS_MODULE,
	.open = testkfd_open,
	.release = testkfd_release,
	.unlocked_ioctl = testkfd_ioctl,
	.compat_ioctl = compat_ptr_ioctl, /* as kfd_fops: one layout for both */
};

static struct miscdevice testkfd_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kfd",
	.fops = &testkfd_fops,
	.mode = 0666,
};
static bool testkfd_registered;

static int __init testdrm_init(void)
{
	size_t i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(personalities); i++)
		if (!strcmp(personality, personalities[i].param))
			played = &personalities[i];
	if (!played) {
		pr_err("tally_testdrm: unknown personality '%s'\n", personality);
		return -EINVAL;
	}
	strscpy(played_name, played->name, sizeof(played_name));
	testdrm_driver.name = played_name;

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
	if (!strcmp(played->param, "amdgpu")) {
		ret = misc_register(&testkfd_misc);
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
		misc_deregister(&testkfd_misc);
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
