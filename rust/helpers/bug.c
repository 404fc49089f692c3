// SPDX-License-Identifier: GPL-2.0
/* Warnings. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/bug.h>

/* WARN_ON_ONCE(), with one "once" for all of riw's Rust callers. */
bool riw_warn_on_once(bool cond)
{
	return WARN_ON_ONCE(cond);
}
