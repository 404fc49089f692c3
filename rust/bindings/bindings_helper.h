/* SPDX-License-Identifier: GPL-2.0 */
/* The C headers riw's Rust abstractions are generated from (scripts/riw-bindgen.sh). */
#include <linux/netdevice.h>
#include <linux/if_arp.h>
#include <linux/etherdevice.h>
#include <net/addrconf.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include <rdma/iw_cm.h>
#include <rdma/rdma_cm.h>
#include <rdma/restrack.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_netlink.h>
#include "../helpers.h"
#include "../riw_trace.h"
#include <linux/crc32c.h>
