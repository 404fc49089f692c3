/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Declarations of the C side of riw's Rust abstractions (rust/), read by bindgen
 * (scripts/riw-bindgen.sh) and included by the C files that define them; its sections
 * follow those files. Where C lives, and the rule for each:
 *
 * - rust/helpers/<subsystem>.c: one-line forwards only. Each function is one statement,
 *   a use of the kernel's C API that Rust cannot make through the bindings (a static
 *   inline function, a macro, a variable or a field), its arguments passed through, plus
 *   constant ones where the kernel's takes more (GFP flags, limits, masks): no branches,
 *   no state, no other logic.
 * - rust/params.c, rust/defer.c and rust/trace.c: what the 6.12 kernel crate cannot
 *   express (module_param; a per-CPU variable and the protocol around it; trace events,
 *   defined in rust/riw_trace.h), each with its contract at its top, against which
 *   rust/params.rs, rust/defer.rs and rust/trace.rs state their safety.
 *
 * All other logic is Rust, in rust/, where every unsafe block proves its safety.
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
#include <net/netlink.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>

/* helpers/bug.c */
bool riw_warn_on_once(bool cond);

/* helpers/completion.c */
void riw_init_completion(struct completion *done);

/* helpers/cpumask.c */
unsigned int riw_cpumask_next_online(int cpu);
unsigned int riw_cpumask_first_online(void);
unsigned int riw_nr_cpu_ids(void);
unsigned int riw_cpumask_next_possible(int cpu);

/* helpers/debugfs.c */
struct dentry *riw_debugfs_create_dir(const char *name, struct dentry *parent);
struct dentry *riw_debugfs_create_file(const char *name, umode_t mode, struct dentry *parent,
				       void *data, const struct file_operations *fops);
void riw_debugfs_remove(struct dentry *dentry);

/* helpers/idr.c */
void riw_ida_init(struct ida *ida);
int riw_ida_alloc_range(struct ida *ida, unsigned int min, unsigned int max);

/* helpers/jiffies.c */
unsigned long riw_msecs_to_jiffies(unsigned int ms);
unsigned long riw_jiffies(void);

/* helpers/mm.c */
unsigned long riw_vma_flags(const struct vm_area_struct *vma);
void riw_vma_forbid_exec(struct vm_area_struct *vma);
bool riw_virt_addr_valid(const void *addr);
struct page *riw_virt_to_page(const void *addr);
void riw_get_page(struct page *page);
void riw_put_page(struct page *page);
bool riw_sendpage_ok(struct page *page);

/* helpers/netdevice.c */
struct net_device *riw_netdev_notifier_info_to_dev(void *info);
void riw_dev_hold(struct net_device *dev);
void riw_dev_put(struct net_device *dev);
bool riw_netif_running(const struct net_device *dev);
bool riw_netif_carrier_ok(const struct net_device *dev);

/* helpers/percpu.c: `counters` is a __percpu array of u64 (sparse's annotation stays in C). */
void *riw_alloc_percpu_u64(unsigned int count);
void riw_free_percpu(void *counters);
void riw_this_cpu_add_u64(void *counters, unsigned int index, u64 value);
u64 riw_per_cpu_read_u64(void *counters, unsigned int index, int cpu);
/* helpers/netlink.c */
struct nlattr *riw_nla_nest_start_noflag(struct sk_buff *skb, int attrtype);
int riw_nla_nest_end(struct sk_buff *skb, struct nlattr *start);
void riw_nla_nest_cancel(struct sk_buff *skb, struct nlattr *start);

/* helpers/preempt.c */
bool riw_in_task(void);
bool riw_in_softirq(void);
bool riw_irqs_disabled(void);
bool riw_preemptible(void);
int riw_raw_smp_processor_id(void);
bool riw_current_is_kworker(void);
int riw_current_nice(void);

/* helpers/rcupdate.c */
void riw_rcu_read_lock(void);
void riw_rcu_read_unlock(void);

/* helpers/rdma.c */
bool riw_ib_device_try_get(struct ib_device *dev);
int riw_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int riw_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
bool riw_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len);
struct ib_ucontext *riw_udata_to_ucontext(struct ib_udata *udata);
struct ib_udata *riw_attrs_udata(struct uverbs_attr_bundle *attrs);
int riw_ib_umem_offset(struct ib_umem *umem);
size_t riw_ib_umem_num_pages(struct ib_umem *umem);

/* helpers/scatterlist.c */
struct page *riw_sg_page_iter_page(struct sg_page_iter *piter);

/* helpers/spinlock.c */
void riw_spin_lock_bh(spinlock_t *lock);
void riw_spin_unlock_bh(spinlock_t *lock);

/* helpers/timer.c */
bool riw_timer_pending(const struct timer_list *timer);

/* helpers/vmalloc.c */
void *riw_vmalloc_user(unsigned long size);
void *riw_vzalloc(unsigned long size);

/* helpers/workqueue.c */
void riw_init_work(struct work_struct *work, work_func_t fn);
void riw_init_rcu_work(struct rcu_work *rwork, work_func_t fn);
void riw_init_delayed_work(struct delayed_work *dwork, work_func_t fn);

/* helpers/xarray.c */
void riw_xa_init_alloc(struct xarray *xa);
int riw_xa_alloc(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max);
int riw_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max, u32 *next);
void riw_xa_lock(struct xarray *xa);
void riw_xa_unlock(struct xarray *xa);
void *riw_xa_find(struct xarray *xa, unsigned long *index);
void *riw_xa_erase(struct xarray *xa, unsigned long index);
int riw_xa_insert(struct xarray *xa, unsigned long index, void *entry);

/* defer.c: see there for the protocol. */
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

/* trace.c: riw's trace events, forwarded (see riw_trace.h). */
void riw_trace_mpa(struct ib_device *dev, u32 ep, bool sent, u8 kind, u8 revision, bool crc,
		   bool markers, bool p2p, u8 rtr, u16 ird, u16 ord, u16 pd_len,
		   const struct __kernel_sockaddr_storage *peer);
void riw_trace_rtr(struct ib_device *dev, u32 qpn, bool sent, u8 mode);
void riw_trace_qp_state(struct ib_device *dev, u32 qpn, u8 old, u8 new, const char *cause);
void riw_trace_terminate(struct ib_device *dev, u32 qpn, bool sent, u8 layer, u8 etype,
			 u8 code);
void riw_trace_crc_error(struct ib_device *dev, u32 qpn, u32 computed, u32 received);
void riw_trace_conn_close(struct ib_device *dev, u32 qpn, bool abort, int status,
			  const char *reason);
void riw_trace_sock_backpressure(struct ib_device *dev, u32 qpn, bool full);
void riw_trace_post(struct ib_device *dev, u32 qpn, bool recv, u64 wr_id, u8 opcode,
		    u32 length);
void riw_trace_complete(struct ib_device *dev, u32 qpn, u64 wr_id, u8 opcode, u32 length,
			u16 status);

/* params.c: the module parameters. */
bool riw_param_mpa_crc_required(void);
bool riw_param_peer_to_peer(void);
unsigned int riw_param_fpdu_segments(void);
extern unsigned int riw_tx_zerocopy_min;
bool riw_param_tx_zerocopy_keep(void);

/*
 * A type Rust builds that C reads: queue memory mapped to userspace through an
 * rdma_user_mmap_entry (rust/rdma/mmap.rs).
 */
struct riw_mmap_entry {
	struct rdma_user_mmap_entry base;
	void *addr;
};

/*
 * Kernel TCP sockets: forwards for rust/socket.rs, in rust/helpers/socket.c (whose
 * contract says what they may be).
 */
int riw_sock_create(struct net_device *ndev, int family, struct socket **res);
void riw_sock_lock(struct socket *sock);
void riw_sock_unlock(struct socket *sock);
int riw_sock_state(struct sock *sk);
int riw_sock_error(struct sock *sk);
void riw_write_lock_bh(rwlock_t *lock);
void riw_write_unlock_bh(rwlock_t *lock);
void riw_sk_user_data_set_nocopy(struct sock *sk, void *data);
void riw_sk_user_data_clear(struct sock *sk);
void *riw_sk_user_data_nocopy_locked(const struct sock *sk);
void *riw_sk_user_data_nocopy_rcu(const struct sock *sk);
struct tcp_sock *riw_tcp_sk(struct sock *sk);
int riw_tcp_inq(struct sock *sk);
unsigned int riw_sock_mss(struct socket *sock);
int riw_sk_wmem_queued(struct sock *sk);
bool riw_sk_stream_is_writeable(const struct sock *sk);
void riw_sock_clear_nospace(struct socket *sock);
int riw_tcp_read_sock(struct sock *sk, read_descriptor_t *desc, sk_read_actor_t actor);
int riw_tcp_sendmsg_locked(struct sock *sk, struct msghdr *msg, size_t size);
void riw_tcp_sock_set_nodelay(struct sock *sk);
void riw_sock_set_reuseaddr(struct sock *sk);
void riw_sock_no_linger(struct socket *sock);
int riw_sock_bind_to_netdev(struct socket *sock, struct net_device *ndev);
int riw_sock_set_v6only(struct socket *sock);
bool riw_skb_queue_empty(const struct sk_buff_head *list);
struct skb_shared_info *riw_skb_shinfo(const struct sk_buff *skb);
struct page *riw_skb_frag_page(const skb_frag_t *frag);
void *riw_kmap_local_page(struct page *page);
void riw_kunmap_local(const void *addr);

#endif
