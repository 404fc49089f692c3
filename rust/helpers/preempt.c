// SPDX-License-Identifier: GPL-2.0
/* The execution context: preemption, interrupts, the CPU. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/preempt.h>
#include <linux/irqflags.h>
#include <linux/smp.h>
#include <linux/sched.h>

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

/* Whether this runs in a work item (task context, a workqueue's worker). */
bool riw_current_is_kworker(void)
{
	return in_task() && (current->flags & PF_WQ_WORKER);
}

/* The current task's nice level: WQ_HIGHPRI work queues' workers run below 0. */
int riw_current_nice(void)
{
	return task_nice(current);
}
