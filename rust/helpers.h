/* SPDX-License-Identifier: GPL-2.0 */
/*
 * riw's C shim: static inline functions and macros of the kernel's C API, made callable
 * from Rust. Each one is a plain forward; the Rust side (rust/) documents its safety.
 */
#ifndef RIW_HELPERS_H
#define RIW_HELPERS_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

struct net_device *riw_netdev_notifier_info_to_dev(void *info);
void riw_dev_hold(struct net_device *dev);
void riw_dev_put(struct net_device *dev);
bool riw_netif_running(const struct net_device *dev);
bool riw_netif_carrier_ok(const struct net_device *dev);
bool riw_ib_device_try_get(struct ib_device *dev);
int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);

#endif
