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
 * amdgpu_bo_create()'s are: what tally's in-kernel charge hooks.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/overflow.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/seq_file.h>
#include <linux/string.h>
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

/* amdgpu's mem_info_gtt_total/_used (amdgpu_gtt_mgr.c) on the platform device,
 * for the daemon's measured headroom: 0 (the default) exports none (reading
 * either file fails, as on a driver without them); set at load or at run time.
 * _used is the GTT buffers this driver holds now, counted bytes (no pages
 * held: on-chip resources, userptrs, attachments), as amdgpu's manager counts
 * what it placed. */
static unsigned long long mem_info_gtt_total;
module_param(mem_info_gtt_total, ullong, 0644);
MODULE_PARM_DESC(mem_info_gtt_total, "export mem_info_gtt_total (bytes) and _used; 0: none");
static atomic64_t testdrm_gtt_used = ATOMIC64_INIT(0);

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

/* Refuse absurd sizes before allocating a page array for them: the driver's
 * own CREATE with EINVAL, the real drivers' allocations with ENOMEM (their
 * memory managers are this big). */
#define TESTDRM_MAX_BYTES (4ULL << 30)

static bool testdrm_is_xe(void)
{
	return !strcmp(played->param, "xe");
}

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

static struct testdrm_bo *to_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct testdrm_bo, base);
}

static void testdrm_bo_free(struct drm_gem_object *obj)
{
	struct testdrm_bo *bo = to_bo(obj);
	unsigned long i;

	if (bo->counted && bo->region == TALLY_TESTDRM_REGION_GTT)
		atomic64_sub(obj->size, &testdrm_gtt_used);
	for (i = 0; i < bo->npages; i++)
		if (bo->pages[i])
			__free_page(bo->pages[i]);
	kvfree(bo->pages);
	drm_gem_object_release(obj);
	if (bo->parent)
		drm_gem_object_put(bo->parent);
	kfree(bo);
}

static const struct drm_gem_object_funcs testdrm_bo_funcs = {
	.free = testdrm_bo_free,
};

static bool testdrm_region_ok(u32 region)
{
	return region <= TALLY_TESTDRM_REGION_VRAM && played->regions[region];
}

/* A GEM object of `size` bytes (page-aligned, at most TESTDRM_MAX_BYTES) with
 * no pages yet, holding one reference (the caller's); initialised through
 * drm_gem_private_object_init() as every driver's are. */
static struct testdrm_bo *testdrm_bo_init(struct drm_device *dev, u32 region, u64 size,
					  bool counted)
{
	struct testdrm_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return NULL;
	bo->region = region;
	bo->counted = counted;
	bo->base.funcs = &testdrm_bo_funcs;
	drm_gem_private_object_init(dev, &bo->base, size);
	if (counted && region == TALLY_TESTDRM_REGION_GTT)
		atomic64_add(size, &testdrm_gtt_used);
	return bo;
}

/* An object that holds no page of its own, shown in no fdinfo region: an
 * on-chip resource, a userptr (the user's own pages), a doorbell or MMIO SG
 * BO, or an attachment over `parent`'s memory (which it keeps alive). */
static struct drm_gem_object *testdrm_bo_new_nopages(struct drm_device *dev, u32 region,
						     u64 size, struct drm_gem_object *parent)
{
	struct testdrm_bo *bo = testdrm_bo_init(dev, region, size, false);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	if (parent) {
		drm_gem_object_get(parent);
		bo->parent = parent;
	}
	return &bo->base;
}

/* A buffer object with all its pages, counted in `region`. The caller checked
 * the region and that size is page-aligned, not 0 and within TESTDRM_MAX_BYTES. */
static struct drm_gem_object *testdrm_bo_new_pages(struct drm_device *dev, u32 region, u64 size)
{
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN | __GFP_ZERO;
	struct testdrm_bo *bo;
	unsigned long i;

	if (READ_ONCE(charge_memcg))
		gfp |= __GFP_ACCOUNT;

	bo = testdrm_bo_init(dev, region, size, true);
	if (!bo)
		return ERR_PTR(-ENOMEM);
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

/* A handle on `file` for a new object: on success the handle holds the only
 * reference; on failure the object is freed. */
static int testdrm_handle_obj(struct drm_file *file, struct drm_gem_object *obj, u32 *handle)
{
	int ret;

	if (IS_ERR(obj))
		return PTR_ERR(obj);
	ret = drm_gem_handle_create(file, obj, handle);
	drm_gem_object_put(obj);
	return ret;
}

/* The driver's own create (and the dumb buffer): EINVAL for an unknown region,
 * 0 bytes or more than TESTDRM_MAX_BYTES. */
static int testdrm_handle_new(struct drm_device *dev, struct drm_file *file, u32 region,
			      u64 size, u32 *handle)
{
	if (!testdrm_region_ok(region) || size == 0 || size > TESTDRM_MAX_BYTES)
		return -EINVAL;
	return testdrm_handle_obj(file, testdrm_bo_new_pages(dev, region, PAGE_ALIGN(size)),
				  handle);
}

static int testdrm_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct tally_testdrm_create *args = data;

	return testdrm_handle_new(dev, file, args->region, args->size, &args->handle);
}

/* amdgpu's domains (uapi/drm/amdgpu_drm.h). */
#define AMDGPU_NORMAL_DOMAINS                                                 \
	(TALLY_TESTDRM_AMDGPU_DOMAIN_CPU | TALLY_TESTDRM_AMDGPU_DOMAIN_GTT | \
	 TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM)
#define AMDGPU_ONCHIP_DOMAINS                                                \
	(TALLY_TESTDRM_AMDGPU_DOMAIN_GDS | TALLY_TESTDRM_AMDGPU_DOMAIN_GWS | \
	 TALLY_TESTDRM_AMDGPU_DOMAIN_OA)
#define AMDGPU_DOMAIN_MASK \
	(AMDGPU_NORMAL_DOMAINS | AMDGPU_ONCHIP_DOMAINS | TALLY_TESTDRM_AMDGPU_DOMAIN_DOORBELL)
/* AMDGPU_GEM_CREATE_SETTABLE_MASK (amdgpu_gem.h, 7.x): CPU_ACCESS_REQUIRED,
 * NO_CPU_ACCESS, CPU_GTT_USWC, VRAM_CLEARED, VM_ALWAYS_VALID, EXPLICIT_SYNC,
 * VRAM_WIPE_ON_RELEASE, ENCRYPTED, DISCARDABLE, COHERENT, UNCACHED,
 * EXT_COHERENT, GFX12_DCC. */
#define AMDGPU_GEM_CREATE_SETTABLE_MASK                                                \
	(BIT_ULL(0) | BIT_ULL(1) | BIT_ULL(2) | BIT_ULL(3) | BIT_ULL(6) | BIT_ULL(7) | \
	 BIT_ULL(9) | BIT_ULL(10) | BIT_ULL(12) | BIT_ULL(13) | BIT_ULL(14) |          \
	 BIT_ULL(15) | BIT_ULL(16))

/* Mirrors amdgpu_gem_are_domains_valid() (amdgpu_gem.c, 6.1 to 7.x): any mix of
 * CPU/GTT/VRAM, or exactly one special domain (GDS, GWS, OA, DOORBELL) alone. */
static bool domains_checked = true;
module_param(domains_checked, bool, 0644);
MODULE_PARM_DESC(domains_checked,
		 "refuse GEM_CREATE domain mixes as amdgpu_gem_are_domains_valid() does (0: a kernel before it, "
		 "where GDS/GWS/OA beside GTT make a buffer of the shifted size)");

static bool testdrm_amdgpu_domains_valid(u32 domains)
{
	u32 special = domains & (AMDGPU_DOMAIN_MASK & ~AMDGPU_NORMAL_DOMAINS);

	if (!special)
		return true;
	if (domains & AMDGPU_NORMAL_DOMAINS)
		return false;
	return !(special & (special - 1));
}

/* Mirrors amdgpu_gem_create_ioctl() (amdgpu_gem.c) and the size arithmetic and
 * placement of amdgpu_bo_create() / amdgpu_bo_placement_from_domain()
 * (amdgpu_object.c), as of 7.x:
 *  - flags outside AMDGPU_GEM_CREATE_SETTABLE_MASK: EINVAL;
 *  - domains outside AMDGPU_GEM_DOMAIN_MASK: EINVAL. DOORBELL is in the mask
 *    from 6.5; 6.12 then refused it ("until userspace code to use it is
 *    available"), 7.x takes it: followed here;
 *  - !amdgpu_gem_are_domains_valid(): EINVAL. So a special domain never comes
 *    with CPU/GTT/VRAM: no shifted size is ever a real buffer;
 *  - ENCRYPTED without TMZ: EINVAL (the Strix Halo APU played, GC 11.5.1, has
 *    TMZ off by default: amdgpu_gmc_tmz_set());
 *  - GDS/GWS/OA with VM_ALWAYS_VALID: EINVAL ("GDS bo cannot be per-vm-bo");
 *  - size: GWS or OA: size << PAGE_SHIFT; else GDS: ALIGN(size, 4) <<
 *    PAGE_SHIFT; else PAGE_ALIGN(size) (1 page per byte/resource on chip);
 *  - amdgpu_bo_validate_size(): no larger than the GTT/VRAM manager, ENOMEM;
 *    here TESTDRM_MAX_BYTES stands for it (for the on-chip objects too, whose
 *    real managers are smaller still). Size 0: EINVAL (the driver's own rule);
 *  - placement: VRAM first when asked for (then DOORBELL, GTT, CPU, GDS, GWS,
 *    OA; none: CPU), so VRAM in the domains is region vram, else (GTT, CPU or
 *    nothing) region gtt, the test driver having no cpu region (amdgpu prints
 *    drm-*-cpu for TTM_PL_SYSTEM). A special domain alone is an object of no
 *    pages in no region: on-chip resources (and the doorbell BAR) are not
 *    memory, and amdgpu's fdinfo counts only VRAM, GTT and CPU placements. */
static int testdrm_amdgpu_gem_create_ioctl(struct drm_device *dev, void *data,
					   struct drm_file *file)
{
	union tally_testdrm_amdgpu_gem_create *args = data;
	u64 domains = args->in.domains, flags = args->in.domain_flags;
	u64 size = args->in.bo_size;
	struct drm_gem_object *obj;
	u32 region, handle;
	int ret;

	if (flags & ~AMDGPU_GEM_CREATE_SETTABLE_MASK)
		return -EINVAL;
	if (domains & ~(u64)AMDGPU_DOMAIN_MASK)
		return -EINVAL;
	if (READ_ONCE(domains_checked) && !testdrm_amdgpu_domains_valid(domains))
		return -EINVAL;
	if (flags & TALLY_TESTDRM_AMDGPU_CREATE_ENCRYPTED)
		return -EINVAL;
	if ((domains & AMDGPU_ONCHIP_DOMAINS) &&
	    (flags & TALLY_TESTDRM_AMDGPU_CREATE_VM_ALWAYS_VALID))
		return -EINVAL;

	/* amdgpu_bo_create(): checked against the cap before shifting, so that no
	 * size wraps (the kernel's unsigned long would). */
	if (domains & (TALLY_TESTDRM_AMDGPU_DOMAIN_GWS | TALLY_TESTDRM_AMDGPU_DOMAIN_OA)) {
		if (size > TESTDRM_MAX_BYTES >> PAGE_SHIFT)
			return -ENOMEM;
		size <<= PAGE_SHIFT;
	} else if (domains & TALLY_TESTDRM_AMDGPU_DOMAIN_GDS) {
		if (size > TESTDRM_MAX_BYTES >> PAGE_SHIFT)
			return -ENOMEM;
		size = ALIGN(size, 4) << PAGE_SHIFT;
	} else {
		if (size > TESTDRM_MAX_BYTES)
			return -ENOMEM;
		size = PAGE_ALIGN(size);
	}
	if (size > TESTDRM_MAX_BYTES)
		return -ENOMEM;
	if (size == 0)
		return -EINVAL;

	/* A special domain alone is not memory; beside CPU/GTT/VRAM (a kernel
	 * without the domains check) placement lists the memory domains too, and
	 * the buffer of the shifted size is made in memory. */
	if ((domains & (AMDGPU_ONCHIP_DOMAINS | TALLY_TESTDRM_AMDGPU_DOMAIN_DOORBELL)) &&
	    !(domains & AMDGPU_NORMAL_DOMAINS)) {
		obj = testdrm_bo_new_nopages(dev, TALLY_TESTDRM_REGION_GTT, size, NULL);
	} else {
		region = (domains & TALLY_TESTDRM_AMDGPU_DOMAIN_VRAM) ? TALLY_TESTDRM_REGION_VRAM
								       : TALLY_TESTDRM_REGION_GTT;
		if (!testdrm_region_ok(region))
			return -EINVAL; /* a personality without that region */
		obj = testdrm_bo_new_pages(dev, region, size);
	}
	ret = testdrm_handle_obj(file, obj, &handle);
	if (ret)
		return ret;
	memset(args, 0, sizeof(*args));
	args->out.handle = handle;
	return 0;
}

/* xe (uapi/drm/xe_drm.h). */
#define XE_GEM_CREATE_FLAG_DEFER_BACKING (1u << 0)
#define XE_GEM_CREATE_FLAG_SCANOUT (1u << 1)
#define XE_GEM_CREATE_FLAG_NEEDS_VISIBLE_VRAM (1u << 2)
#define XE_GEM_CREATE_FLAG_NO_COMPRESSION (1u << 3) /* 7.x */
/* xe->info.mem_region_mask of the part played: system and one VRAM tile. */
#define XE_MEM_REGION_MASK (TALLY_TESTDRM_XE_PLACEMENT_SYSTEM | TALLY_TESTDRM_XE_PLACEMENT_VRAM0)

/* Mirrors xe_gem_create_ioctl() (xe_bo.c), 7.x, on a discrete Xe2 part:
 * pad/reserved nonzero, placement 0 or outside the device's regions, unknown
 * flags, handle nonzero, size 0 or not page-aligned, cpu_caching not WB/WC,
 * VRAM without WC, SCANOUT with WB, NEEDS_VISIBLE_VRAM without VRAM: EINVAL;
 * vm_id: ENOENT (no VM exists here). Extensions: EINVAL, as 6.12 refuses them
 * (7.x creates the BO, then walks the chain; the only one is PXP's). The
 * buffer: xe's placement tries VRAM first (__xe_bo_placement_for_flags()), so a
 * placement holding vram0 is region vram0, else gtt. */
static int testdrm_xe_gem_create(struct drm_device *dev, struct tally_testdrm_xe_gem_create *args,
				 struct drm_file *file)
{
	bool vram = args->placement & TALLY_TESTDRM_XE_PLACEMENT_VRAM0;
	u32 handle;
	int ret;

	if (args->pad[0] || args->pad[1] || args->pad[2] || args->reserved[0] ||
	    args->reserved[1])
		return -EINVAL;
	if (args->extensions)
		return -EINVAL;
	if ((args->placement & ~XE_MEM_REGION_MASK) || !args->placement)
		return -EINVAL;
	if (args->flags & ~(XE_GEM_CREATE_FLAG_DEFER_BACKING | XE_GEM_CREATE_FLAG_SCANOUT |
			    XE_GEM_CREATE_FLAG_NEEDS_VISIBLE_VRAM |
			    XE_GEM_CREATE_FLAG_NO_COMPRESSION))
		return -EINVAL;
	if (args->handle)
		return -EINVAL;
	if (!args->size || (args->size & ~PAGE_MASK))
		return -EINVAL;
	if ((args->flags & XE_GEM_CREATE_FLAG_NEEDS_VISIBLE_VRAM) && !vram)
		return -EINVAL;
	if (!args->cpu_caching || args->cpu_caching > TALLY_TESTDRM_XE_CPU_CACHING_WC)
		return -EINVAL;
	if (vram && args->cpu_caching != TALLY_TESTDRM_XE_CPU_CACHING_WC)
		return -EINVAL;
	if ((args->flags & XE_GEM_CREATE_FLAG_SCANOUT) &&
	    args->cpu_caching == TALLY_TESTDRM_XE_CPU_CACHING_WB)
		return -EINVAL;
	if (args->vm_id)
		return -ENOENT;
	if (args->size > TESTDRM_MAX_BYTES)
		return -ENOMEM;
	ret = testdrm_handle_obj(file,
				 testdrm_bo_new_pages(dev,
						      vram ? TALLY_TESTDRM_REGION_VRAM
							   : TALLY_TESTDRM_REGION_GTT,
						      args->size),
				 &handle);
	if (ret)
		return ret;
	args->handle = handle;
	return 0;
}

/* A dumb buffer (DRM_IOCTL_MODE_CREATE_DUMB on the card node, which any
 * client may ask for): pitch by the width, GTT-like pages, as a KMS driver
 * makes one. */
/* A dumb buffer (DRM_IOCTL_MODE_CREATE_DUMB on the card node, which any
 * client may ask for), pitched as amdgpu_mode_dumb_create() pitches it
 * (amdgpu_gem_align_pitch(): the width aligned to 256, 128 or 64 pixels for
 * 1, 2, 3-4 bytes a pixel), so a narrow buffer of many rows is far larger
 * than its pixels, as on the real driver; GTT-like pages. */
static int testdrm_dumb_create(struct drm_file *file, struct drm_device *dev,
			       struct drm_mode_create_dumb *args)
{
	u32 cpp = DIV_ROUND_UP(args->bpp, 8), mask = 0, aligned;

	switch (cpp) {
	case 1:
		mask = 255;
		break;
	case 2:
		mask = 127;
		break;
	case 3:
	case 4:
		mask = 63;
		break;
	}
	if (check_add_overflow(args->width, mask, &aligned))
		return -EINVAL;
	aligned &= ~mask;
	if (check_mul_overflow(aligned, cpp, &args->pitch) || !args->pitch)
		return -EINVAL;
	args->size = PAGE_ALIGN((u64)args->pitch * args->height);
	if (!args->size)
		return -EINVAL;
	return testdrm_handle_new(dev, file, TALLY_TESTDRM_REGION_GTT, args->size, &args->handle);
}

static int testdrm_map(struct drm_file *file, struct tally_testdrm_map *args)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(file, args->handle);

	if (!obj)
		return -ENOENT;
	if (obj->funcs == &testdrm_bo_funcs)
		WRITE_ONCE(to_bo(obj)->mapped, true);
	drm_gem_object_put(obj);
	return 0;
}

/*
 * Command 0x01 is this driver's MAP, and xe's GEM_CREATE (DRM ioctl numbers are
 * per driver): one handler, dispatching on the personality, whose table entry
 * (below) declares the larger struct, xe's, as _IOWR. drm_ioctl() (drm_ioctl.c,
 * 6.1 to 7.x) copies in the caller's _IOC_SIZE(cmd) bytes only when both the
 * caller's command and the table's say IOC_IN, zero-fills the kernel copy up to
 * the larger of the two sizes, and copies out the caller's size only when both
 * say IOC_OUT. So MAP's _IOW of 8 bytes arrives as its 8 bytes, zeros after,
 * and nothing is copied back, as with its own _IOW entry before; xe's _IOWR of
 * 56 bytes arrives whole and its handle goes back. (Choosing one of two
 * tables at load would work too; one entry keeps the table static and the
 * choice in one place.)
 */
#define DRM_IOCTL_TALLY_TESTDRM_MAP_OR_XE_GEM_CREATE DRM_IOCTL_TALLY_TESTDRM_XE_GEM_CREATE
#define DRM_TALLY_TESTDRM_MAP_OR_XE_GEM_CREATE DRM_TALLY_TESTDRM_MAP
static int testdrm_map_or_xe_gem_create_ioctl(struct drm_device *dev, void *data,
					      struct drm_file *file)
{
	if (testdrm_is_xe())
		return testdrm_xe_gem_create(dev, data, file);
	return testdrm_map(file, data);
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
		if (!bo->counted)
			continue; /* no pages: on-chip resources, not memory */
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
static struct drm_device *testdrm_drm;

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

/* /dev/kfd (personality=amdgpu): each open file holds its buffers by handle,
 * as a kfd_process does (its BOs are on KFD's own DRM client, never on a file
 * user space can read the fdinfo of). */
#define TESTKFD_MAX_GPUS 64 /* MAX_GPU_INSTANCE (amdgpu.h) */

/* kfd_doorbell_process_slice() (kfd_doorbell.c, 6.1 to 7.x), for SOC15, whose
 * doorbells are 8 bytes: roundup(8 * KFD_MAX_NUM_OF_QUEUES_PER_PROCESS (1024),
 * PAGE_SIZE); with MES, amdgpu_mes_doorbell_process_slice(), the same 8 KiB. */
#define TESTKFD_DOORBELL_SLICE TALLY_TESTKFD_DOORBELL_SLICE

/* A struct kgd_mem: the buffer, and its attachments by device index (a set
 * bit in `attached` with no object: the device maps the buffer itself). */
struct testkfd_mem {
	struct drm_gem_object *bo;
	u64 va;
	u32 flags;
	bool sg; /* a DOORBELL/MMIO_REMAP SG BO (ttm_bo_type_sg) */
	u64 attached, mapped;
	struct drm_gem_object *att[TESTKFD_MAX_GPUS];
};

struct testkfd_file {
	struct mutex lock; /* as kfd_process.mutex */
	struct xarray mems;
};

static void testkfd_mem_free(struct testkfd_mem *mem)
{
	int i;

	/* kfd_mem_detach() of every attachment, then the BO. */
	for (i = 0; i < TESTKFD_MAX_GPUS; i++)
		if (mem->att[i])
			drm_gem_object_put(mem->att[i]);
	drm_gem_object_put(mem->bo);
	kfree(mem);
}

static int testkfd_open(struct inode *inode, struct file *f)
{
	struct testkfd_file *ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);

	if (!ctx)
		return -ENOMEM;
	mutex_init(&ctx->lock);
	xa_init_flags(&ctx->mems, XA_FLAGS_ALLOC1);
	f->private_data = ctx;
	return 0;
}

static int testkfd_release(struct inode *inode, struct file *f)
{
	struct testkfd_file *ctx = f->private_data;
	struct testkfd_mem *mem;
	unsigned long id;

	xa_for_each(&ctx->mems, id, mem)
		testkfd_mem_free(mem);
	xa_destroy(&ctx->mems);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return 0;
}

/* Mirrors kfd_ioctl_alloc_memory_of_gpu() (kfd_chardev.c) and
 * amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() (amdgpu_amdkfd_gpuvm.c), 6.1 to 7.x.
 * Called with ctx->lock held. */
static int testkfd_alloc(struct testkfd_file *ctx, struct tally_testkfd_alloc_memory_of_gpu *a)
{
	u32 flags = a->flags, region, id;
	u64 size = a->size, user_addr = 0;
	struct testkfd_mem *mem;
	struct drm_gem_object *obj;
	bool pages = true;
	int ret;

	/* kfd_ioctl_alloc_memory_of_gpu(): size 0; the doorbell slice and the MMIO
	 * page are checked by flag before the domain is chosen, so VRAM|DOORBELL
	 * must be a doorbell slice long too. */
	if (size == 0)
		return -EINVAL;
	if (flags & TALLY_TESTKFD_ALLOC_DOORBELL) {
		if (size != TESTKFD_DOORBELL_SLICE)
			return -EINVAL;
	} else if (flags & TALLY_TESTKFD_ALLOC_MMIO_REMAP) {
		if (size != PAGE_SIZE)
			return -EINVAL;
	}

	/* amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu(): VRAM first, then GTT; only
	 * with neither does USERPTR, then DOORBELL/MMIO_REMAP, count. (On an APU,
	 * 6.12 and later allocate a VRAM request in GTT, AMD_IS_APU /
	 * apu_prefer_gtt: no fdinfo shows KFD's BOs, so the region is kept.) */
	if (flags & TALLY_TESTKFD_ALLOC_VRAM) {
		region = TALLY_TESTDRM_REGION_VRAM;
	} else if (flags & TALLY_TESTKFD_ALLOC_GTT) {
		region = TALLY_TESTDRM_REGION_GTT;
	} else {
		region = TALLY_TESTDRM_REGION_GTT; /* domain GTT, allocated in CPU */
		pages = false;
		if (flags & TALLY_TESTKFD_ALLOC_USERPTR) {
			if (!a->mmap_offset)
				return -EINVAL;
			user_addr = untagged_addr(a->mmap_offset);
		} else if (flags & (TALLY_TESTKFD_ALLOC_DOORBELL | TALLY_TESTKFD_ALLOC_MMIO_REMAP)) {
			if (size > UINT_MAX)
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	if (!testdrm_region_ok(region))
		return -EINVAL;
	/* The AQL queue wraparound workaround maps the same memory twice: only
	 * half is allocated. Then PAGE_ALIGN (0: EINVAL), and
	 * amdgpu_amdkfd_reserve_mem_limit()'s ENOMEM (the cap here). */
	if (flags & TALLY_TESTKFD_ALLOC_AQL_QUEUE_MEM)
		size >>= 1;
	size = PAGE_ALIGN(size);
	if (!size)
		return -EINVAL;
	if (size > TESTDRM_MAX_BYTES)
		return -ENOMEM;

	mem = kzalloc(sizeof(*mem), GFP_KERNEL);
	if (!mem)
		return -ENOMEM;
	mem->va = a->va_addr;
	mem->flags = flags;
	mem->sg = !pages && !(flags & TALLY_TESTKFD_ALLOC_USERPTR);
	if (pages)
		obj = testdrm_bo_new_pages(testdrm_drm, region, size);
	else
		obj = testdrm_bo_new_nopages(testdrm_drm, region, size, NULL);
	if (IS_ERR(obj)) {
		kfree(mem);
		return PTR_ERR(obj);
	}
	mem->bo = obj;
	/* init_user_pages(): the BO exists first; then amdgpu_ttm_tt_get_user_pages()
	 * faults the range in for writing (hmm_range_fault, HMM_PFN_REQ_WRITE), which
	 * gives anonymous memory its pages, charged to the caller's memory cgroup;
	 * where there is no writable mapping it fails (EFAULT) and the BO goes. The
	 * pages stay the process's: the driver neither allocates nor pins any. */
	if (user_addr &&
	    fault_in_safe_writeable((const char __user *)(uintptr_t)user_addr, size)) {
		testkfd_mem_free(mem);
		return -EFAULT;
	}
	ret = xa_alloc(&ctx->mems, &id, mem, xa_limit_32b, GFP_KERNEL);
	if (ret) {
		testkfd_mem_free(mem);
		return ret;
	}
	/* MAKE_HANDLE(gpu_id, idr_handle): this driver's GPU has id 0. */
	a->handle = id;
	return 0;
}

/* kfd_process_device_data_by_id(GET_GPU_ID(handle)) and
 * kfd_process_device_translate_handle(): the GPU is 0 here. */
static struct testkfd_mem *testkfd_lookup(struct testkfd_file *ctx, u64 handle, int *err,
					  int unknown)
{
	struct testkfd_mem *mem;

	*err = -EINVAL; /* no such GPU */
	if (handle >> 32)
		return NULL;
	mem = xa_load(&ctx->mems, (unsigned long)handle);
	if (!mem)
		*err = unknown;
	return mem;
}

/* Mirrors kfd_ioctl_free_memory_of_gpu() and
 * amdgpu_amdkfd_gpuvm_free_memory_of_gpu(): EBUSY while mapped anywhere (the
 * handle stays); else every attachment is detached and the BO freed. */
static int testkfd_free(struct testkfd_file *ctx, struct tally_testkfd_free_memory_of_gpu *a)
{
	struct testkfd_mem *mem;
	int err;

	mem = testkfd_lookup(ctx, a->handle, &err, -EINVAL);
	if (!mem)
		return err;
	if (mem->mapped)
		return -EBUSY;
	xa_erase(&ctx->mems, (unsigned long)a->handle);
	testkfd_mem_free(mem);
	return 0;
}

/* Mirrors kfd_mem_attach() (amdgpu_amdkfd_gpuvm.c, 6.1 to 7.x) for device
 * `dev` (0: the BO's own GPU) on a box whose peers do not share the BO's DMA
 * mappings (each GPU in its own IOMMU group, RAM not direct-mapped:
 * !reuse_dmamap()), not in one XGMI hive, with large BARs:
 *  - no VA: EINVAL;
 *  - the own GPU maps the BO itself (KFD_MEM_ATT_SHARED), except an MMIO_REMAP
 *    BO: an SG BO if it is one, else a dma-buf import of its own export, which
 *    amdgpu_gem_prime_import() answers with the same object;
 *  - a peer gets a new BO of the same size over the same memory: an SG BO for
 *    a userptr (create_dmamap_sg_bo(), KFD_MEM_ATT_USERPTR) or a doorbell/MMIO
 *    SG BO (KFD_MEM_ATT_SG), a dma-buf import for GTT and VRAM
 *    (kfd_mem_attach_dmabuf(), KFD_MEM_ATT_DMABUF);
 *  - an AQL BO's second attachment shares the first's BO: nothing new. */
static int testkfd_attach(struct testkfd_mem *mem, unsigned int dev)
{
	struct drm_gem_object *att;

	if (!mem->va)
		return -EINVAL;
	if (dev > 0 || ((mem->flags & TALLY_TESTKFD_ALLOC_MMIO_REMAP) && mem->sg)) {
		att = testdrm_bo_new_nopages(testdrm_drm, to_bo(mem->bo)->region,
					     mem->bo->size, mem->bo);
		if (IS_ERR(att))
			return PTR_ERR(att);
		mem->att[dev] = att;
	}
	mem->attached |= BIT_ULL(dev);
	return 0;
}

/* Mirrors kfd_ioctl_map_memory_to_gpu() and kfd_ioctl_unmap_memory_from_gpu()
 * (kfd_chardev.c) with amdgpu_amdkfd_gpuvm_map_memory_to_gpu() and
 * _unmap_memory_from_gpu(): devices n_success .. n_devices-1, by index (the
 * ids read, not looked at), n_success advanced past each one done. */
static int testkfd_map(struct testkfd_file *ctx, struct tally_testkfd_map_memory_to_gpu *a,
		       bool map)
{
	struct testkfd_mem *mem;
	u32 *devices;
	u32 i;
	int err = 0;

	if (!a->n_devices)
		return -EINVAL;
	if (a->n_success > a->n_devices)
		return -EINVAL;
	devices = memdup_array_user(u64_to_user_ptr(a->device_ids_array_ptr), a->n_devices,
				    sizeof(*devices));
	if (IS_ERR(devices))
		return PTR_ERR(devices);

	/* An unknown handle on a known GPU: ENOMEM, as the kernel says it. */
	mem = testkfd_lookup(ctx, a->handle, &err, -ENOMEM);
	if (!mem)
		goto out;
	err = 0;
	for (i = a->n_success; i < a->n_devices; i++) {
		if (i >= TESTKFD_MAX_GPUS) {
			err = -EINVAL; /* kfd_process_device_data_by_id() finds none */
			break;
		}
		if (map) {
			/* !kfd_mem_is_attached(): attach on the first map only. */
			if (!(mem->attached & BIT_ULL(i))) {
				err = testkfd_attach(mem, i);
				if (err)
					break;
			}
			mem->mapped |= BIT_ULL(i); /* entry->is_mapped */
		} else {
			/* reserve_bo_and_cond_vms(BO_VM_MAPPED) reserved no VM. The
			 * attachments stay until the BO is freed. */
			if (!(mem->mapped & BIT_ULL(i))) {
				err = -EINVAL;
				break;
			}
			mem->mapped &= ~BIT_ULL(i);
		}
		a->n_success = i + 1;
	}
out:
	kfree(devices);
	return err;
}

/* As kfd_ioctl() reads a command: by its number alone, with the direction of
 * the driver's own definition (which replaces the caller's): the caller's
 * first _IOC_SIZE(cmd) bytes in, the rest of the struct zero; for an IOC_OUT
 * command (all but FREE's _IOW), the caller's size back whatever the command
 * returned. */
static int testkfd_copy_in(void *kdata, size_t size, unsigned int cmd, void __user *uarg)
{
	size_t usize = min_t(size_t, _IOC_SIZE(cmd), size);

	memset(kdata, 0, size);
	return copy_from_user(kdata, uarg, usize) ? -EFAULT : 0;
}

static int testkfd_copy_out(void __user *uarg, const void *kdata, size_t size, unsigned int cmd,
			    int ret)
{
	if (_IOC_NR(cmd) == _IOC_NR(AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU))
		return ret;
	if (copy_to_user(uarg, kdata, min_t(size_t, _IOC_SIZE(cmd), size)))
		return -EFAULT; /* an allocated buffer stays until the file closes */
	return ret;
}

static long testkfd_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct testkfd_file *ctx = f->private_data;
	void __user *uarg = (void __user *)arg;
	union {
		struct tally_testkfd_alloc_memory_of_gpu alloc;
		struct tally_testkfd_free_memory_of_gpu free;
		struct tally_testkfd_map_memory_to_gpu map;
	} a;
	size_t size;
	int ret;

	switch (_IOC_NR(cmd)) {
	case _IOC_NR(AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU):
		size = sizeof(a.alloc);
		break;
	case _IOC_NR(AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU):
		size = sizeof(a.free);
		break;
	case _IOC_NR(AMDKFD_IOC_TALLY_MAP_MEMORY_TO_GPU):
	case _IOC_NR(AMDKFD_IOC_TALLY_UNMAP_MEMORY_FROM_GPU):
		size = sizeof(a.map);
		break;
	default:
		return -ENOTTY;
	}
	if (testkfd_copy_in(&a, size, cmd, uarg))
		return -EFAULT;

	mutex_lock(&ctx->lock);
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(AMDKFD_IOC_TALLY_ALLOC_MEMORY_OF_GPU):
		ret = testkfd_alloc(ctx, &a.alloc);
		break;
	case _IOC_NR(AMDKFD_IOC_TALLY_FREE_MEMORY_OF_GPU):
		ret = testkfd_free(ctx, &a.free);
		break;
	case _IOC_NR(AMDKFD_IOC_TALLY_MAP_MEMORY_TO_GPU):
		ret = testkfd_map(ctx, &a.map, true);
		break;
	default:
		ret = testkfd_map(ctx, &a.map, false);
		break;
	}
	mutex_unlock(&ctx->lock);
	return testkfd_copy_out(uarg, &a, size, cmd, ret);
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
