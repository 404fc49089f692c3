// SPDX-License-Identifier: GPL-2.0
/* CPU masks. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/cpumask.h>

unsigned int riw_cpumask_next_online(int cpu)
{
	return cpumask_next(cpu, cpu_online_mask);
}

unsigned int riw_cpumask_first_online(void)
{
	return cpumask_first(cpu_online_mask);
}

unsigned int riw_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

unsigned int riw_cpumask_next_possible(int cpu)
{
	return cpumask_next(cpu, cpu_possible_mask);
}
