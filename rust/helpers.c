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
