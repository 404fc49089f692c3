// SPDX-License-Identifier: GPL-2.0
/* Per-CPU counters. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/percpu.h>

void *riw_alloc_percpu_u64(unsigned int count)
{
	return __alloc_percpu(count * sizeof(u64), sizeof(u64));
}

void riw_free_percpu(void *counters)
{
	free_percpu((void __percpu *)counters);
}

void riw_this_cpu_add_u64(void *counters, unsigned int index, u64 value)
{
	this_cpu_add(((u64 __percpu *)counters)[index], value);
}

u64 riw_per_cpu_read_u64(void *counters, unsigned int index, int cpu)
{
	return READ_ONCE(per_cpu_ptr((u64 __percpu *)counters, cpu)[index]);
}
