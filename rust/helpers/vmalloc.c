// SPDX-License-Identifier: GPL-2.0
/* Virtually contiguous memory. One-line forwards only: see helpers.h. */

#include "helpers.h"

void *riw_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void *riw_vzalloc(unsigned long size)
{
	return vzalloc(size);
}
