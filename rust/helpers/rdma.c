// SPDX-License-Identifier: GPL-2.0
/* The RDMA core: devices, user data, pinned user memory. One-line forwards only: see helpers.h. */

#include "helpers.h"

bool riw_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

/* ib_copy_to_udata() only reads `src`, which it does not declare const. */
int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int riw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

bool riw_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}

struct ib_ucontext *riw_udata_to_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

struct ib_udata *riw_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

int riw_ib_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

size_t riw_ib_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}
