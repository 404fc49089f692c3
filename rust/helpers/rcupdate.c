// SPDX-License-Identifier: GPL-2.0
/* RCU. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/rcupdate.h>

void riw_rcu_read_lock(void)
{
	rcu_read_lock();
}

void riw_rcu_read_unlock(void)
{
	rcu_read_unlock();
}
