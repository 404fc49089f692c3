// SPDX-License-Identifier: GPL-2.0
/* riw's C shim; see helpers.h. */

#include "helpers.h"
#include <linux/crc32c.h>
#include <linux/highmem.h>
#include <linux/scatterlist.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>

/* Module parameters (rust/params.rs reads them). */
static bool mpa_crc_required;
module_param(mpa_crc_required, bool, 0644);
MODULE_PARM_DESC(mpa_crc_required, "Require CRC32c on every FPDU of new connections (default: only if the peer asks)");

static bool peer_to_peer;
module_param(peer_to_peer, bool, 0644);
MODULE_PARM_DESC(peer_to_peer, "As initiator, request MPA peer-to-peer mode (RFC 6581) for new connections");

static unsigned int fpdu_segments;
module_param(fpdu_segments, uint, 0644);
MODULE_PARM_DESC(fpdu_segments, "TCP segments (of the path's MSS) one sent FPDU may span toward any peer, 1 to 45; 0 (default): one, or 11 (about 16 KiB) toward a peer that agreed to larger FPDUs in the MPA exchange");

bool riw_param_mpa_crc_required(void)
{
	return READ_ONCE(mpa_crc_required);
}

bool riw_param_peer_to_peer(void)
{
	return READ_ONCE(peer_to_peer);
}

unsigned int riw_param_fpdu_segments(void)
{
	return READ_ONCE(fpdu_segments);
}

/* Read on every message sent, in place (rust/params.rs): not through a call. */
unsigned int riw_tx_zerocopy_min = 16384;
module_param_named(tx_zerocopy_min, riw_tx_zerocopy_min, uint, 0644);
MODULE_PARM_DESC(tx_zerocopy_min, "Smallest message (bytes) sent zero-copy from registered user memory (default 16384; 0: never)");

static bool tx_zerocopy_keep;
module_param(tx_zerocopy_keep, bool, 0644);
MODULE_PARM_DESC(tx_zerocopy_keep, "Keep sending zero-copy on connections whose route copies the pages anyway (veth, loopback), for testing");

bool riw_param_tx_zerocopy_keep(void)
{
	return READ_ONCE(tx_zerocopy_keep);
}

void riw_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void riw_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

struct net_device *riw_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void riw_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void riw_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

bool riw_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool riw_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

bool riw_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	/* ib_copy_to_udata(), without its non-const source */
	return copy_to_user(udata->outbuf, src, len) ? -EFAULT : 0;
}

void *riw_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void *riw_vzalloc(unsigned long size)
{
	return vzalloc(size);
}

unsigned long riw_vma_flags(const struct vm_area_struct *vma)
{
	return vma->vm_flags;
}

void riw_vma_forbid_exec(struct vm_area_struct *vma)
{
	vm_flags_clear(vma, VM_MAYEXEC);
}

struct ib_ucontext *riw_udata_to_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

int riw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

bool riw_udata_cleared_from(struct ib_udata *udata, size_t offset)
{
	return offset >= udata->inlen ||
	       ib_is_udata_cleared(udata, offset, udata->inlen - offset);
}

struct ib_udata *riw_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

void riw_ida_init(struct ida *ida)
{
	ida_init(ida);
}

int riw_ida_alloc_range(struct ida *ida, unsigned int min, unsigned int max)
{
	return ida_alloc_range(ida, min, max, GFP_KERNEL);
}

void riw_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_BH);
}

int riw_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max)
{
	return xa_alloc_bh(xa, id, entry, XA_LIMIT(min, max), GFP_KERNEL);
}

void riw_xa_lock(struct xarray *xa)
{
	xa_lock_bh(xa);
}

void riw_xa_unlock(struct xarray *xa)
{
	xa_unlock_bh(xa);
}

/* A lookup's first half in one call: the caller takes its reference, then unlocks. */
void *riw_xa_load_rcu(struct xarray *xa, unsigned long index)
{
	rcu_read_lock();
	return xa_load(xa, index);
}

void riw_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/*
 * Pinned user memory. ib_umem_release() may sleep, and the data path can drop the last
 * reference to a region where it must not (in softirq, under a _bh spinlock): the release
 * then goes to a work item, prepared here so that it cannot fail later.
 */
struct riw_umem {
	struct ib_umem *umem;
	/*
	 * Each pinned page, in order, so that the data path finds the page of an offset at
	 * once (a scatterlist walk from the start costs per access, and with the region's
	 * size). Byte 0 of the region is at `first` in pages[0].
	 */
	struct page **pages;
	unsigned long npages;
	unsigned int first;
	struct work_struct release;
};

static struct workqueue_struct *riw_release_wq;

int riw_release_init(void)
{
	riw_release_wq = alloc_workqueue("riw_release", WQ_UNBOUND, 0);
	return riw_release_wq ? 0 : -ENOMEM;
}

/*
 * Runs the releases still queued; called once no region can be dropped any more. A
 * zero-copy release callback may still be on its way out of this module's code (its RCU
 * read section): wait for it.
 */
void riw_release_exit(void)
{
	synchronize_rcu();
	rcu_barrier();
	destroy_workqueue(riw_release_wq);
	riw_release_wq = NULL;
}

/* Waits for every table entry retired so far to be released. */
void riw_release_flush(void)
{
	rcu_barrier();
	flush_workqueue(riw_release_wq);
}

/* Releases a slot no reader can see (never published, or its table is going away). */
void riw_xa_slot_release_now(struct riw_xa_slot *slot)
{
	slot->release(slot->entry);
	kfree(slot);
}

static void riw_xa_slot_release_work(struct work_struct *work)
{
	riw_xa_slot_release_now(container_of(to_rcu_work(work), struct riw_xa_slot, rwork));
}

struct riw_xa_slot *riw_xa_slot_new(void *entry, void (*release)(void *entry))
{
	struct riw_xa_slot *slot = kmalloc(sizeof(*slot), GFP_KERNEL);

	if (!slot)
		return NULL;
	slot->entry = entry;
	slot->release = release;
	INIT_RCU_WORK(&slot->rwork, riw_xa_slot_release_work);
	return slot;
}

/* Releases a slot taken out of its table once no RCU reader can still see it. */
void riw_xa_slot_retire(struct riw_xa_slot *slot)
{
	queue_rcu_work(riw_release_wq, &slot->rwork);
}

static void riw_umem_release_work(struct work_struct *work)
{
	struct riw_umem *mem = container_of(work, struct riw_umem, release);

	ib_umem_release(mem->umem);
	kvfree(mem->pages);
	kfree(mem);
}

struct riw_umem *riw_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
			      int access, int *err)
{
	struct riw_umem *mem = kmalloc(sizeof(*mem), GFP_KERNEL);
	struct sg_page_iter iter;
	unsigned long n = 0;

	if (!mem) {
		*err = -ENOMEM;
		return NULL;
	}
	mem->umem = ib_umem_get(dev, addr, size, access);
	if (IS_ERR(mem->umem)) {
		*err = PTR_ERR(mem->umem);
		kfree(mem);
		return NULL;
	}
	mem->first = ib_umem_offset(mem->umem);
	mem->npages = ib_umem_num_pages(mem->umem);
	mem->pages = kvmalloc_array(mem->npages, sizeof(*mem->pages), GFP_KERNEL);
	if (!mem->pages) {
		ib_umem_release(mem->umem);
		kfree(mem);
		*err = -ENOMEM;
		return NULL;
	}
	for_each_sgtable_page(&mem->umem->sgt_append.sgt, &iter, 0) {
		if (n == mem->npages)
			break;
		mem->pages[n++] = sg_page_iter_page(&iter);
	}
	/* ib_umem_get() pinned every page of the range: the table is whole. */
	if (WARN_ON_ONCE(n != mem->npages)) {
		riw_umem_release_work(&mem->release);
		*err = -EFAULT;
		return NULL;
	}
	INIT_WORK(&mem->release, riw_umem_release_work);
	return mem;
}

/*
 * Releases now if this context may sleep, else from the work queue. Without
 * CONFIG_PREEMPT_COUNT a plain spinlock does not show; riw holds regions in atomic
 * context only in softirq or under _bh spinlocks, which in_softirq() sees anyway.
 */
void riw_umem_put(struct riw_umem *mem)
{
	bool may_sleep = in_task() && !in_softirq() && !irqs_disabled() &&
			 (!IS_ENABLED(CONFIG_PREEMPT_COUNT) || preemptible());

	if (may_sleep)
		riw_umem_release_work(&mem->release);
	else
		queue_work(riw_release_wq, &mem->release);
}

/*
 * The kernel address of byte `offset` of the region and how many bytes from there lie in
 * its page (at most `len`); NULL if the range is not wholly inside the region.
 */
static void *riw_umem_piece(struct riw_umem *mem, size_t offset, size_t len, size_t *n)
{
	size_t pos = offset + mem->first;
	unsigned long index = pos >> PAGE_SHIFT;

	if (unlikely(index >= mem->npages))
		return NULL;
	*n = min_t(size_t, len, PAGE_SIZE - offset_in_page(pos));
	return kmap_local_page(mem->pages[index]) + offset_in_page(pos);
}

/* What riw_umem_walk() does with each piece of a region. */
enum riw_umem_op { RIW_UMEM_READ, RIW_UMEM_WRITE, RIW_UMEM_CRC };

/*
 * Reads `len` bytes at `offset` of the region into `buf`, writes them from `buf`, or
 * continues the CRC32c in `crc` over them, a page at a time. Each caller passes a constant
 * `op`, so each gets a loop of its own, without a callback per page.
 */
static __always_inline int riw_umem_walk(struct riw_umem *mem, size_t offset, size_t len,
					 enum riw_umem_op op, void *buf, u32 *crc)
{
	if (offset > mem->umem->length || len > mem->umem->length - offset)
		return -EINVAL;
	while (len) {
		size_t n;
		void *addr = riw_umem_piece(mem, offset, len, &n);

		if (WARN_ON_ONCE(!addr))
			return -EFAULT;
		if (op == RIW_UMEM_READ)
			memcpy(buf, addr, n);
		else if (op == RIW_UMEM_WRITE)
			memcpy(addr, buf, n);
		else
			*crc = crc32c(*crc, addr, n);
		kunmap_local(addr);
		if (op != RIW_UMEM_CRC)
			buf += n;
		offset += n;
		len -= n;
	}
	return 0;
}

int riw_umem_copy_from(void *dst, struct riw_umem *mem, size_t offset, size_t len)
{
	return riw_umem_walk(mem, offset, len, RIW_UMEM_READ, dst, NULL);
}

void *riw_xa_find(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

void *riw_xa_erase(struct xarray *xa, unsigned long index)
{
	return xa_erase_bh(xa, index);
}

int riw_xa_insert(struct xarray *xa, unsigned long index, void *entry)
{
	return xa_insert_bh(xa, index, entry, GFP_KERNEL);
}

/*
 * The engine's work (Read Responses, bulk placement, sends the socket held back) runs at
 * high priority, as nvme-tcp's I/O work does: an RNIC's engine does not wait for the host's
 * CPUs, and RDMA applications busy-poll their CQs, which at normal priority takes the CPU
 * from the work they wait for.
 */
struct workqueue_struct *riw_alloc_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_MEM_RECLAIM | WQ_HIGHPRI, 0, name);
}

/*
 * The CPU the engine's work runs on: the next one after the CPU that queues it (the work
 * queue is per CPU). Work is mostly queued from a socket callback, in softirq, which over
 * loopback and veth runs on the sending application's CPU, in its system call: work queued
 * there waits for that application to leave the CPU, two context switches for every Read
 * Response (ib_read_lat: about 41 against 31 us in one guest, and between the two at
 * random with an unbound queue), and bulk data placed there competes with its sender.
 */
static int riw_work_cpu(void)
{
	unsigned int cpu = cpumask_next(raw_smp_processor_id(), cpu_online_mask);

	if (cpu >= nr_cpu_ids)
		cpu = cpumask_first(cpu_online_mask);
	return cpu < nr_cpu_ids ? cpu : raw_smp_processor_id();
}

void riw_init_delayed_work(struct delayed_work *dwork, work_func_t fn)
{
	INIT_DELAYED_WORK(dwork, fn);
}

/*
 * Has `dwork` run as soon as it can. Returns false if it was idle and is queued now,
 * true if it was pending: queued already (left as it is, where mod_delayed_work() would
 * take it off the list and queue it again, at a cost that showed in profiles of every
 * bulk transfer) or waiting on its timer (brought forward). A pending run starts after
 * this call and sees what the caller did before it.
 */
bool riw_run_delayed_work_now(struct workqueue_struct *wq, struct delayed_work *dwork)
{
	int cpu = riw_work_cpu();

	if (queue_delayed_work_on(cpu, wq, dwork, 0))
		return false;
	if (timer_pending(&dwork->timer))
		return mod_delayed_work_on(cpu, wq, dwork, 0);
	return true;
}

bool riw_queue_delayed_work(struct workqueue_struct *wq, struct delayed_work *dwork,
			    unsigned long delay)
{
	return queue_delayed_work_on(riw_work_cpu(), wq, dwork, delay);
}

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

/*
 * Opens `scope` for items of `key` on this CPU, unless another task holds its slot (one
 * that sleeps or was preempted inside its own scope): then the scope stays closed and
 * takes nothing.
 */
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

/*
 * Hands `item` to the scope of `key` the task running here is in: false if it is in none,
 * or in one of another key, or the scope is full.
 */
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

/*
 * The oldest item handed to `scope`; NULL once it holds none, and then the scope is
 * closed (one call, not two, for a doorbell whose send brought nothing).
 */
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

/* Closes `scope` early; what it holds is left for riw_defer_take(). */
void riw_defer_end(struct riw_defer_scope *scope)
{
	unsigned long flags;

	local_irq_save(flags);
	riw_defer_close(scope);
	local_irq_restore(flags);
}

unsigned long riw_msecs_to_jiffies(unsigned int ms)
{
	return msecs_to_jiffies(ms);
}

unsigned long riw_jiffies(void)
{
	return READ_ONCE(jiffies);
}

void riw_init_completion(struct completion *done)
{
	init_completion(done);
}

int riw_umem_copy_to(struct riw_umem *mem, size_t offset, const void *src, size_t len)
{
	return riw_umem_walk(mem, offset, len, RIW_UMEM_WRITE, (void *)src, NULL);
}

/* Continues a CRC32c over `len` bytes at `offset` of the umem, reading the pinned pages. */
int riw_umem_crc32c(struct riw_umem *mem, size_t offset, size_t len, u32 *crc)
{
	return riw_umem_walk(mem, offset, len, RIW_UMEM_CRC, NULL, crc);
}

/*
 * For zero-copy sends (rust/socket.rs): the region's length, and the pinned page holding
 * byte `offset` of the region with that byte's offset in the page (NULL past the pages).
 */
size_t riw_umem_length(const struct riw_umem *mem)
{
	return mem->umem->length;
}

struct page *riw_umem_page(const struct riw_umem *mem, size_t offset, size_t *in_page)
{
	size_t pos = offset + mem->first;
	unsigned long index = pos >> PAGE_SHIFT;

	/* ib_umem_get() pinned every page of the range: callers stay within its length. */
	if (WARN_ON_ONCE(index >= mem->npages))
		return NULL;
	*in_page = offset_in_page(pos);
	return mem->pages[index];
}
