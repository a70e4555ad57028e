// SPDX-License-Identifier: GPL-2.0
/*
 * tally_testdrm's GEM objects and the allocation ioctls that make them: its
 * own CREATE and MAP, amdgpu's and xe's GEM_CREATE, and the dumb buffer. Apart
 * from testdrm_core.c (the driver's registration) to keep each file under 600
 * lines; testdrm_kfd.c makes its buffers through the constructors here.
 */
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>

#include "testdrm.h"

static bool testdrm_is_xe(void)
{
	return !strcmp(testdrm_played->param, "xe");
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

const struct drm_gem_object_funcs testdrm_bo_funcs = {
	.free = testdrm_bo_free,
};

bool testdrm_region_ok(u32 region)
{
	return region <= TALLY_TESTDRM_REGION_VRAM && testdrm_played->regions[region];
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
struct drm_gem_object *testdrm_bo_new_nopages(struct drm_device *dev, u32 region,
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
struct drm_gem_object *testdrm_bo_new_pages(struct drm_device *dev, u32 region, u64 size)
{
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN | __GFP_ZERO;
	struct testdrm_bo *bo;
	unsigned long i;

	if (READ_ONCE(testdrm_charge_memcg))
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

int testdrm_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
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
int testdrm_amdgpu_gem_create_ioctl(struct drm_device *dev, void *data,
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
int testdrm_dumb_create(struct drm_file *file, struct drm_device *dev,
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
 * (testdrm_core.c) declares the larger struct, xe's, as _IOWR. drm_ioctl() (drm_ioctl.c,
 * 6.1 to 7.x) copies in the caller's _IOC_SIZE(cmd) bytes only when both the
 * caller's command and the table's say IOC_IN, zero-fills the kernel copy up to
 * the larger of the two sizes, and copies out the caller's size only when both
 * say IOC_OUT. So MAP's _IOW of 8 bytes arrives as its 8 bytes, zeros after,
 * and nothing is copied back, as with its own _IOW entry before; xe's _IOWR of
 * 56 bytes arrives whole and its handle goes back. (Choosing one of two
 * tables at load would work too; one entry keeps the table static and the
 * choice in one place.)
 */
int testdrm_map_or_xe_gem_create_ioctl(struct drm_device *dev, void *data,
				       struct drm_file *file)
{
	if (testdrm_is_xe())
		return testdrm_xe_gem_create(dev, data, file);
	return testdrm_map(file, data);
}
