// SPDX-License-Identifier: GPL-2.0
/* Jiffies. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/jiffies.h>

unsigned long riw_msecs_to_jiffies(unsigned int ms)
{
	return msecs_to_jiffies(ms);
}

unsigned long riw_jiffies(void)
{
	return READ_ONCE(jiffies);
}
