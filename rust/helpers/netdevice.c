// SPDX-License-Identifier: GPL-2.0
/* Network devices. One-line forwards only: see helpers.h. */

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
