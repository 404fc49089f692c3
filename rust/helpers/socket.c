// SPDX-License-Identifier: GPL-2.0
/*
 * riw's C shim for kernel TCP sockets (rust/socket.rs holds the logic and its safety).
 *
 * Contract: every function here is a one-line forward, declared in the socket section of
 * helpers.h, of
 *  - a static inline function or macro of the kernel's C API, which Rust cannot call; or
 *  - an exported function that the generated bindings leave out (scripts/riw-bindgen.sh
 *    lets only riw_* functions of these headers through, and the kernel's own bindings
 *    do not include <net/sock.h> nor <net/tcp.h>).
 * Each does what the forwarded call does, with the same arguments and context rules; no
 * function here keeps state or takes a lock other than the one it is named after.
 */

#include "helpers.h"
#include <linux/highmem.h>
#include <net/ipv6.h>
#include <net/tcp.h>

int riw_sock_create(struct net_device *ndev, int family, struct socket **res)
{
	/*
	 * As a user socket (kern = 0): it holds a reference on the netdev's namespace, which
	 * so outlives the connection, as it would for an application's socket.
	 */
	return __sock_create(dev_net(ndev), family, SOCK_STREAM, IPPROTO_TCP, res, 0);
}

void riw_sock_lock(struct socket *sock)
{
	lock_sock(sock->sk);
}

void riw_sock_unlock(struct socket *sock)
{
	release_sock(sock->sk);
}

int riw_sock_state(struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

int riw_sock_error(struct sock *sk)
{
	return sock_error(sk);
}

void riw_write_lock_bh(rwlock_t *lock)
{
	write_lock_bh(lock);
}

void riw_write_unlock_bh(rwlock_t *lock)
{
	write_unlock_bh(lock);
}

void riw_sk_user_data_set_nocopy(struct sock *sk, void *data)
{
	__rcu_assign_sk_user_data_with_flags(sk, data, SK_USER_DATA_NOCOPY);
}

void riw_sk_user_data_clear(struct sock *sk)
{
	rcu_assign_sk_user_data(sk, NULL);
}

void *riw_sk_user_data_nocopy_locked(const struct sock *sk)
{
	return __locked_read_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
}

void *riw_sk_user_data_nocopy_rcu(const struct sock *sk)
{
	return __rcu_dereference_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
}

struct tcp_sock *riw_tcp_sk(struct sock *sk)
{
	return tcp_sk(sk);
}

int riw_tcp_inq(struct sock *sk)
{
	return tcp_inq(sk);
}

unsigned int riw_sock_mss(struct socket *sock)
{
	return READ_ONCE(tcp_sk(sock->sk)->mss_cache);
}

int riw_sk_wmem_queued(struct sock *sk)
{
	return READ_ONCE(sk->sk_wmem_queued);
}

bool riw_sk_stream_is_writeable(const struct sock *sk)
{
	return __sk_stream_is_writeable(sk, 1);
}

void riw_sock_clear_nospace(struct socket *sock)
{
	clear_bit(SOCK_NOSPACE, &sock->flags);
}

int riw_tcp_read_sock(struct sock *sk, read_descriptor_t *desc, sk_read_actor_t actor)
{
	return tcp_read_sock(sk, desc, actor);
}

int riw_tcp_sendmsg_locked(struct sock *sk, struct msghdr *msg, size_t size)
{
	return tcp_sendmsg_locked(sk, msg, size);
}

void riw_tcp_sock_set_nodelay(struct sock *sk)
{
	tcp_sock_set_nodelay(sk);
}

void riw_sock_set_reuseaddr(struct sock *sk)
{
	sock_set_reuseaddr(sk);
}

void riw_sock_no_linger(struct socket *sock)
{
	sock_no_linger(sock->sk);
}

int riw_sock_bind_to_netdev(struct socket *sock, struct net_device *ndev)
{
	return sock_bindtoindex(sock->sk, ndev->ifindex, true);
}

int riw_sock_set_v6only(struct socket *sock)
{
	return ip6_sock_set_v6only(sock->sk);
}

bool riw_skb_queue_empty(const struct sk_buff_head *list)
{
	return skb_queue_empty(list);
}

struct skb_shared_info *riw_skb_shinfo(const struct sk_buff *skb)
{
	return skb_shinfo(skb);
}

struct page *riw_skb_frag_page(const skb_frag_t *frag)
{
	return skb_frag_page(frag);
}

void *riw_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void riw_kunmap_local(const void *addr)
{
	kunmap_local(addr);
}
