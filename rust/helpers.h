/* SPDX-License-Identifier: GPL-2.0 */
/*
 * riw's C shim: static inline functions and macros of the kernel's C API, made callable
 * from Rust. Each one is a plain forward; the Rust side (rust/) documents its safety.
 */
#ifndef RIW_HELPERS_H
#define RIW_HELPERS_H

#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/idr.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/net.h>
#include <linux/completion.h>
#include <linux/workqueue.h>
#include <net/sock.h>

struct net_device *riw_netdev_notifier_info_to_dev(void *info);
void riw_dev_hold(struct net_device *dev);
void riw_dev_put(struct net_device *dev);
bool riw_netif_running(const struct net_device *dev);
bool riw_netif_carrier_ok(const struct net_device *dev);
bool riw_ib_device_try_get(struct ib_device *dev);
int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
unsigned long riw_vma_flags(const struct vm_area_struct *vma);
void riw_vma_forbid_exec(struct vm_area_struct *vma);
struct ib_ucontext *riw_udata_to_ucontext(struct ib_udata *udata);
struct ib_udata *riw_attrs_udata(struct uverbs_attr_bundle *attrs);
void riw_ida_init(struct ida *ida);
int riw_ida_alloc_range(struct ida *ida, unsigned int min, unsigned int max);
void riw_xa_init_alloc(struct xarray *xa);
int riw_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max);
void riw_xa_lock(struct xarray *xa);
void *riw_xa_find(struct xarray *xa, unsigned long *index);
void *riw_xa_erase(struct xarray *xa, unsigned long index);
int riw_xa_insert(struct xarray *xa, unsigned long index, void *entry);
void riw_xa_unlock(struct xarray *xa);
void *riw_xa_load_rcu(struct xarray *xa, unsigned long index);
void riw_rcu_read_unlock(void);

/*
 * An xarray entry that outlives its removal by an RCU grace period, so that lookups need
 * no lock: `release(entry)` then runs from riw's release work queue.
 */
struct riw_xa_slot {
	void *entry;
	void (*release)(void *entry);
	struct rcu_work rwork;
};

struct riw_xa_slot *riw_xa_slot_new(void *entry, void (*release)(void *entry));
void riw_xa_slot_retire(struct riw_xa_slot *slot);
void riw_xa_slot_release_now(struct riw_xa_slot *slot);
void riw_release_flush(void);
/* Pinned user memory, released with riw_umem_put() from any context. */
struct riw_umem;
int riw_release_init(void);
void riw_release_exit(void);
struct riw_umem *riw_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
			      int access, int *err);
void riw_umem_put(struct riw_umem *mem);
int riw_umem_copy_from(void *dst, struct riw_umem *mem, size_t offset, size_t len);
int riw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
bool riw_udata_cleared_from(struct ib_udata *udata, size_t offset);

/* Queue memory mapped to userspace through an rdma_user_mmap_entry. */
struct riw_mmap_entry {
	struct rdma_user_mmap_entry base;
	void *addr;
};

void *riw_vmalloc_user(unsigned long size);
void *riw_vzalloc(unsigned long size);

bool riw_param_mpa_crc_required(void);
bool riw_param_peer_to_peer(void);
unsigned int riw_param_fpdu_segments(void);
extern unsigned int riw_tx_zerocopy_min;
bool riw_param_tx_zerocopy_keep(void);

/* Spinlocks that keep softirqs off while held. */
void riw_spin_lock_bh(spinlock_t *lock);
void riw_spin_unlock_bh(spinlock_t *lock);

/*
 * Kernel TCP sockets: forwards for rust/socket.rs, in rust/helpers/socket.c (whose
 * contract says what they may be).
 */
int riw_sock_create(struct net_device *ndev, int family, struct socket **res);
void riw_sock_lock(struct socket *sock);
void riw_sock_unlock(struct socket *sock);
int riw_sock_state(struct sock *sk);
int riw_sock_error(struct sock *sk);
bool riw_in_task(void);
void riw_write_lock_bh(rwlock_t *lock);
void riw_write_unlock_bh(rwlock_t *lock);
void riw_rcu_read_lock(void);
void riw_sk_user_data_set_nocopy(struct sock *sk, void *data);
void riw_sk_user_data_clear(struct sock *sk);
void *riw_sk_user_data_nocopy_locked(const struct sock *sk);
void *riw_sk_user_data_nocopy_rcu(const struct sock *sk);
struct tcp_sock *riw_tcp_sk(struct sock *sk);
int riw_tcp_inq(struct sock *sk);
unsigned int riw_sock_mss(struct socket *sock);
int riw_tcp_read_sock(struct sock *sk, read_descriptor_t *desc, sk_read_actor_t actor);
int riw_tcp_sendmsg_locked(struct sock *sk, struct msghdr *msg, size_t size);
void riw_tcp_sock_set_nodelay(struct sock *sk);
void riw_sock_set_reuseaddr(struct sock *sk);
void riw_sock_no_linger(struct socket *sock);
int riw_sock_bind_to_netdev(struct socket *sock, struct net_device *ndev);
bool riw_skb_queue_empty(const struct sk_buff_head *list);
struct skb_shared_info *riw_skb_shinfo(const struct sk_buff *skb);
struct page *riw_skb_frag_page(const skb_frag_t *frag);
void *riw_kmap_local_page(struct page *page);
void riw_kunmap_local(const void *addr);

/* Work queues, delayed work and completions. */
struct workqueue_struct *riw_alloc_workqueue(const char *name);
void riw_init_delayed_work(struct delayed_work *dwork, work_func_t fn);
bool riw_run_delayed_work_now(struct workqueue_struct *wq, struct delayed_work *dwork);
bool riw_queue_delayed_work(struct workqueue_struct *wq, struct delayed_work *dwork,
			    unsigned long delay);
unsigned long riw_msecs_to_jiffies(unsigned int ms);
unsigned long riw_jiffies(void);
void riw_init_completion(struct completion *done);

/*
 * Work handed to the task running on this CPU: while a task is inside a scope, code that
 * runs on its CPU in its name (a softirq it raised, a socket backlog it processes) may
 * hand it up to RIW_DEFER_ITEMS items of the scope's key, which it takes before it leaves.
 */
#define RIW_DEFER_ITEMS 4

struct riw_defer_scope {
	const void *key;
	int cpu;
	unsigned int head;
	unsigned int tail;
	void *items[RIW_DEFER_ITEMS];
};

void riw_defer_begin(struct riw_defer_scope *scope, const void *key);
bool riw_defer_add(const void *key, void *item);
void *riw_defer_take(struct riw_defer_scope *scope);
void riw_defer_end(struct riw_defer_scope *scope);

/* Copies into pinned user memory. */
int riw_umem_copy_to(struct riw_umem *mem, size_t offset, const void *src, size_t len);
int riw_umem_crc32c(struct riw_umem *mem, size_t offset, size_t len, u32 *crc);

/* For zero-copy sends of pinned user memory (rust/socket.rs). */
size_t riw_umem_length(const struct riw_umem *mem);
struct page *riw_umem_page(const struct riw_umem *mem, size_t offset, size_t *in_page);
#endif
