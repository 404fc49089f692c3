// SPDX-License-Identifier: GPL-2.0
/* riw's C shim; see helpers.h. */

#include "helpers.h"

struct net_device *riw_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void riw_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void riw_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

bool riw_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool riw_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

bool riw_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	/* ib_copy_to_udata(), without its non-const source */
	return copy_to_user(udata->outbuf, src, len) ? -EFAULT : 0;
}

void *riw_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void *riw_vzalloc(unsigned long size)
{
	return vzalloc(size);
}

unsigned long riw_vma_flags(const struct vm_area_struct *vma)
{
	return vma->vm_flags;
}

void riw_vma_forbid_exec(struct vm_area_struct *vma)
{
	vm_flags_clear(vma, VM_MAYEXEC);
}

struct ib_ucontext *riw_udata_to_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

int riw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

bool riw_udata_cleared_from(struct ib_udata *udata, size_t offset)
{
	return offset >= udata->inlen ||
	       ib_is_udata_cleared(udata, offset, udata->inlen - offset);
}

struct ib_udata *riw_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

void riw_ida_init(struct ida *ida)
{
	ida_init(ida);
}

int riw_ida_alloc_range(struct ida *ida, unsigned int min, unsigned int max)
{
	return ida_alloc_range(ida, min, max, GFP_KERNEL);
}

void riw_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC);
}

int riw_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max)
{
	return xa_alloc(xa, id, entry, XA_LIMIT(min, max), GFP_KERNEL);
}

void riw_xa_lock(struct xarray *xa)
{
	xa_lock(xa);
}

void riw_xa_unlock(struct xarray *xa)
{
	xa_unlock(xa);
}

struct ib_umem *riw_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
			     int access, int *err)
{
	struct ib_umem *umem = ib_umem_get(dev, addr, size, access);

	if (IS_ERR(umem)) {
		*err = PTR_ERR(umem);
		return NULL;
	}
	return umem;
}

void *riw_xa_find(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

int riw_xa_insert(struct xarray *xa, unsigned long index, void *entry)
{
	return xa_insert(xa, index, entry, GFP_KERNEL);
}
