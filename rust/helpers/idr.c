// SPDX-License-Identifier: GPL-2.0
/* ID allocators. One-line forwards only: see helpers.h. */

#include "helpers.h"

void riw_ida_init(struct ida *ida)
{
	ida_init(ida);
}

int riw_ida_alloc_range(struct ida *ida, unsigned int min, unsigned int max)
{
	return ida_alloc_range(ida, min, max, GFP_KERNEL);
}
