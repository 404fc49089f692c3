// SPDX-License-Identifier: GPL-2.0
/* Work items (one lockdep class per kind, as each macro makes). One-line forwards only: see helpers.h. */

#include "helpers.h"

void riw_init_work(struct work_struct *work, work_func_t fn)
{
	INIT_WORK(work, fn);
}

void riw_init_rcu_work(struct rcu_work *rwork, work_func_t fn)
{
	INIT_RCU_WORK(rwork, fn);
}

void riw_init_delayed_work(struct delayed_work *dwork, work_func_t fn)
{
	INIT_DELAYED_WORK(dwork, fn);
}
