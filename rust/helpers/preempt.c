// SPDX-License-Identifier: GPL-2.0
/* The execution context: preemption, interrupts, the CPU. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/preempt.h>
#include <linux/irqflags.h>
#include <linux/smp.h>

bool riw_in_task(void)
{
	return in_task();
}

bool riw_in_softirq(void)
{
	return in_softirq();
}

bool riw_irqs_disabled(void)
{
	return irqs_disabled();
}

/* Always false without CONFIG_PREEMPT_COUNT, where preemption cannot be told. */
bool riw_preemptible(void)
{
	return preemptible();
}

int riw_raw_smp_processor_id(void)
{
	return raw_smp_processor_id();
}
