// SPDX-License-Identifier: GPL-2.0
/* Timers. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/timer.h>

bool riw_timer_pending(const struct timer_list *timer)
{
	return timer_pending(timer);
}
