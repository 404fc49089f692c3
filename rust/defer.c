// SPDX-License-Identifier: GPL-2.0
/*
 * Work handed to the task running on this CPU, in C because it needs a per-CPU variable
 * (DEFINE_PER_CPU), which the 6.12 kernel crate cannot define.
 *
 * Contract (every function may be called from any context: each keeps interrupts off
 * while it touches the per-CPU slot, and none sleeps or allocates):
 * - riw_defer_begin() opens a scope of `key` on a struct riw_defer_scope of the caller's,
 *   which must stay in place (not move, not be reused) until the scope is closed. Each
 *   CPU has one slot, held by one task: the scope opens only if no task holds this CPU's
 *   slot (another may sleep or have been preempted in its own scope, or this task be in
 *   one already); otherwise it stays closed and takes nothing, and all below still holds.
 * - While the scope is open, code that runs on the CPU the scope was opened on as the
 *   task that opened it (a softirq its own send raised, a socket backlog it processes,
 *   the task itself) may hand it items: riw_defer_add() stores `item` and returns true
 *   only if the running task holds this CPU's slot with a scope of `key` that holds fewer
 *   than RIW_DEFER_ITEMS items; on false the item is still the caller's. Items are opaque
 *   pointers; the key's owner decides what they are.
 * - Only the opener calls riw_defer_take() and riw_defer_end() on its scope, from
 *   whichever CPU it runs on now. riw_defer_take() returns the items in the order they
 *   were added, each once, and when it finds none closes the scope and returns NULL.
 *   riw_defer_end() closes the scope early; what it holds is still returned by
 *   riw_defer_take(). Closing a closed scope does nothing.
 * - Once riw_defer_take() has returned NULL the scope is closed and empty, and its memory
 *   may go.
 */

#include "helpers.h"
#include <linux/percpu.h>

/*
 * The scope each CPU's running task holds, if any. `task` is read alone first: only the
 * task named there, running on this CPU and interrupted (or calling), may use `scope`,
 * which lives on that task's stack until its scope is closed (riw_defer_close()).
 */
struct riw_defer_slot {
	struct task_struct *task;
	struct riw_defer_scope *scope;
};

static DEFINE_PER_CPU(struct riw_defer_slot, riw_defer_slots);

void riw_defer_begin(struct riw_defer_scope *scope, const void *key)
{
	struct riw_defer_slot *slot;
	unsigned long flags;

	scope->key = key;
	scope->head = 0;
	scope->tail = 0;
	local_irq_save(flags);
	slot = this_cpu_ptr(&riw_defer_slots);
	/* Pairs with the release in riw_defer_close(), which may run on another CPU. */
	if (smp_load_acquire(&slot->task)) {
		scope->cpu = -1;
	} else {
		scope->cpu = smp_processor_id();
		slot->scope = scope;
		WRITE_ONCE(slot->task, current);
	}
	local_irq_restore(flags);
}

bool riw_defer_add(const void *key, void *item)
{
	struct riw_defer_slot *slot;
	struct riw_defer_scope *scope;
	unsigned long flags;
	bool added = false;

	local_irq_save(flags);
	slot = this_cpu_ptr(&riw_defer_slots);
	if (READ_ONCE(slot->task) == current) {
		scope = slot->scope;
		if (scope->key == key && scope->tail - scope->head < RIW_DEFER_ITEMS) {
			scope->items[scope->tail++ % RIW_DEFER_ITEMS] = item;
			added = true;
		}
	}
	local_irq_restore(flags);
	return added;
}

/*
 * Closes `scope`, from whichever CPU the task now runs on; it takes nothing more. Called
 * with interrupts off.
 */
static void riw_defer_close(struct riw_defer_scope *scope)
{
	struct riw_defer_slot *slot;

	if (scope->cpu < 0)
		return;
	slot = per_cpu_ptr(&riw_defer_slots, scope->cpu);
	/*
	 * Adders on that CPU compare `task` with their current task first; while this task
	 * runs elsewhere they never match, and on that CPU interrupts are off here. The slot
	 * is free once `task` is NULL, so `scope` is cleared first: a task that takes the
	 * slot then, on that CPU, writes after us.
	 */
	slot->scope = NULL;
	smp_store_release(&slot->task, NULL);
	scope->cpu = -1;
}

/* One call, not two, for a doorbell whose send brought nothing: take, or close. */
void *riw_defer_take(struct riw_defer_scope *scope)
{
	unsigned long flags;
	void *item = NULL;

	local_irq_save(flags);
	if (scope->head != scope->tail)
		item = scope->items[scope->head++ % RIW_DEFER_ITEMS];
	else
		riw_defer_close(scope);
	local_irq_restore(flags);
	return item;
}

void riw_defer_end(struct riw_defer_scope *scope)
{
	unsigned long flags;

	local_irq_save(flags);
	riw_defer_close(scope);
	local_irq_restore(flags);
}
