// SPDX-License-Identifier: GPL-2.0
/* XArrays in allocating mode, locked with softirqs off. One-line forwards only: see helpers.h. */

#include "helpers.h"

void riw_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_BH);
}

int riw_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max)
{
	return xa_alloc_bh(xa, id, entry, XA_LIMIT(min, max), GFP_KERNEL);
}

int riw_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max, u32 *next)
{
	return xa_alloc_cyclic_bh(xa, id, entry, XA_LIMIT(min, max), next, GFP_KERNEL);
}

void riw_xa_lock(struct xarray *xa)
{
	xa_lock_bh(xa);
}

void riw_xa_unlock(struct xarray *xa)
{
	xa_unlock_bh(xa);
}

void *riw_xa_find(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

void *riw_xa_erase(struct xarray *xa, unsigned long index)
{
	return xa_erase_bh(xa, index);
}

int riw_xa_insert(struct xarray *xa, unsigned long index, void *entry)
{
	return xa_insert_bh(xa, index, entry, GFP_KERNEL);
}
