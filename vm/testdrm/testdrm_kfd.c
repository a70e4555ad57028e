// SPDX-License-Identifier: GPL-2.0
/*
 * tally_testdrm's /dev/kfd (personality=amdgpu): KFD's ALLOC_MEMORY_OF_GPU,
 * FREE_MEMORY_OF_GPU, MAP_MEMORY_TO_GPU and UNMAP_MEMORY_FROM_GPU over the
 * GEM objects of testdrm_gem.c. A device of its own (a misc device that
 * testdrm_core.c registers at load), so a file of its own.
 */
#include <linux/module.h>
#include <linux/bits.h>
#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>
#include <drm/drm_gem.h>

#include "testdrm.h"

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

struct miscdevice testdrm_kfd_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kfd",
	.fops = &testkfd_fops,
	.mode = 0666,
};
