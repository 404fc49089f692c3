// SPDX-License-Identifier: GPL-2.0
/* Spinlocks that keep softirqs off while held. One-line forwards only: see helpers.h. */

#include "helpers.h"

void riw_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void riw_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}
