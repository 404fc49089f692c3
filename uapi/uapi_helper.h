/* SPDX-License-Identifier: GPL-2.0 */
/* The user ABI riw speaks: rdma-core's soft-iWARP provider (see uapi/mod.rs). */
#include <rdma/siw-abi.h>
#include <rdma/ib_user_verbs.h>
