// SPDX-License-Identifier: GPL-2.0
/*
 * tally_testdrm's fdinfo: what a client's buffers hold per region, printed
 * through drm_show_fdinfo() from 6.5, or with the keys amdgpu printed itself
 * before. Apart from the GEM objects (testdrm_gem.c) as the one reader of
 * them that user space sees; the file size rule (600 lines) asks for it too.
 */
#include <linux/seq_file.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>

#include "testdrm.h"

struct testdrm_stats {
	u64 shared, private, resident;
};

/* Per region, what the client's buffers hold (mapped ones only when asked). */
static void testdrm_collect(struct drm_file *file, struct testdrm_stats stats[2])
{
	bool unmapped_too = READ_ONCE(testdrm_count_unmapped);
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
void testdrm_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct testdrm_stats stats[2] = {};
	int r;

	if (testdrm_played->silent)
		return;
	testdrm_collect(file, stats);
	for (r = 0; r < 2; r++) {
		struct drm_memory_stats s = {
			.shared = stats[r].shared,
			.private = stats[r].private,
			.resident = stats[r].resident,
		};

		if (testdrm_played->regions[r])
			drm_print_memory_stats(p, &s, DRM_GEM_OBJECT_RESIDENT,
					       testdrm_played->regions[r]);
	}
}
#else
/* Before 6.5 every driver printed its own keys; amdgpu printed these. */
static atomic64_t testdrm_client_ids = ATOMIC64_INIT(0);

int testdrm_open(struct drm_device *dev, struct drm_file *file)
{
	file->driver_priv = (void *)(uintptr_t)atomic64_inc_return(&testdrm_client_ids);
	return 0;
}

void testdrm_fops_show_fdinfo(struct seq_file *m, struct file *f)
{
	struct drm_file *file = f->private_data;
	struct testdrm_stats stats[2] = {};
	int r;

	testdrm_collect(file, stats);
	seq_printf(m, "drm-driver:\t%s\n", testdrm_played->name);
	seq_printf(m, "drm-client-id:\t%llu\n", (u64)(uintptr_t)file->driver_priv);
	if (testdrm_played->silent)
		return;
	for (r = 0; r < 2; r++) {
		const char *name = testdrm_played->regions[r];
		u64 total = stats[r].shared + stats[r].private;

		if (!name)
			continue;
		if (!strcmp(testdrm_played->name, "amdgpu") ||
		    !strcmp(testdrm_played->name, "tally_testdrm")) {
			seq_printf(m, "drm-memory-%s: \t%llu KiB\n", name, total / 1024);
			continue;
		}
		seq_printf(m, "drm-total-%s:\t%llu KiB\n", name, total / 1024);
		seq_printf(m, "drm-shared-%s:\t%llu KiB\n", name, stats[r].shared / 1024);
		seq_printf(m, "drm-resident-%s:\t%llu KiB\n", name, stats[r].resident / 1024);
	}
}
#endif
