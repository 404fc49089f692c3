// SPDX-License-Identifier: GPL-2.0
/* riw's kernel TCP sockets; see helpers.h. */

#include "helpers.h"
#include <linux/highmem.h>
#include <net/tcp.h>

int riw_sock_create(struct net_device *ndev, int family, struct socket **res)
{
	/*
	 * As a user socket (kern = 0): it holds a reference on the netdev's namespace, which
	 * so outlives the connection, as it would for an application's socket.
	 */
	return __sock_create(dev_net(ndev), family, SOCK_STREAM, IPPROTO_TCP, res, 0);
}

void riw_sock_install(struct socket *sock, void *data, const struct riw_sock_callbacks *cb,
		      struct riw_sock_callbacks *saved)
{
	struct sock *sk = sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	saved->data_ready = sk->sk_data_ready;
	saved->state_change = sk->sk_state_change;
	saved->write_space = sk->sk_write_space;
	/* NOCOPY: connections a listener accepts do not inherit the pointer. */
	__rcu_assign_sk_user_data_with_flags(sk, data, SK_USER_DATA_NOCOPY);
	sk->sk_data_ready = cb->data_ready;
	sk->sk_state_change = cb->state_change;
	sk->sk_write_space = cb->write_space;
	write_unlock_bh(&sk->sk_callback_lock);
}

void *riw_sock_uninstall(struct socket *sock, const struct riw_sock_callbacks *saved)
{
	struct sock *sk = sock->sk;
	void *data;

	write_lock_bh(&sk->sk_callback_lock);
	data = __locked_read_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
	rcu_assign_sk_user_data(sk, NULL);
	sk->sk_data_ready = saved->data_ready;
	sk->sk_state_change = saved->state_change;
	sk->sk_write_space = saved->write_space;
	write_unlock_bh(&sk->sk_callback_lock);
	/* Callbacks still running hold the pointer in an RCU read section. */
	synchronize_rcu();
	return data;
}

static size_t riw_sock_readable(struct sock *sk)
{
	return max(tcp_inq(sk), 0);
}

/*
 * Callbacks read sk_user_data under RCU rather than sk_callback_lock: they run from
 * softirq and from the socket's backlog processing, under socket locks, and lockdep
 * finds the callback lock taken there in an order the TCP stack's own use conflicts with
 * (inet_csk_listen_stop takes it under the socket spinlock).
 */
void *riw_sock_callback_begin(struct sock *sk, bool *locked, size_t *readable)
{
	/*
	 * Whether this context holds the socket's lock: TCP calls the callbacks in softirq
	 * under the socket's spinlock when no task owns the socket, and in the owning task
	 * itself when it processes the socket's backlog in release_sock().
	 */
	*locked = !sock_owned_by_user_nocheck(sk) || in_task();
	/* For data-ready, what it may read: a call of its own was two more block lookups. */
	if (readable)
		*readable = *locked ? riw_sock_readable(sk) : 0;
	rcu_read_lock();
	return __rcu_dereference_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
}

void riw_sock_callback_end(struct sock *sk)
{
	rcu_read_unlock();
}

int riw_sock_state(struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

int riw_sock_error(struct socket *sock)
{
	return sock_error(sock->sk);
}

int riw_sock_send(struct socket *sock, const void *buf, size_t len, bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct sock *sk = sock->sk;
	int ret;

	/*
	 * What tcp_sendmsg() does, without the socket layer's calls above it (60 of the 150
	 * instructions from here to TCP, for every FPDU): the socket is a kernel TCP socket
	 * of ours, which no LSM policy governs.
	 */
	iov_iter_kvec(&msg.msg_iter, ITER_SOURCE, &iov, 1, len);
	lock_sock(sk);
	ret = tcp_sendmsg_locked(sk, &msg, len);
	release_sock(sk);
	return ret;
}

struct riw_sock_reader {
	riw_sock_chunk_fn fn;
	void *ctx;
};

/* Gives the reader one run of bytes; a reader that takes fewer stops the walk. */
static size_t riw_read_run(struct riw_sock_reader *reader, const u8 *data, size_t len,
			   bool *stopped)
{
	size_t used = min(reader->fn(reader->ctx, data, len), len);

	if (used < len)
		*stopped = true;
	return used;
}

/*
 * Hands the reader `len` bytes of `skb` from `offset`, one contiguous run at a time: the
 * linear part, each page of each fragment, then the skbs of the fragment list, each page
 * mapped with kmap_local_page() for its run. Returns the bytes taken.
 */
static size_t riw_skb_walk_frag_list(struct riw_sock_reader *reader,
				     const struct sk_buff *skb, unsigned int offset, size_t len,
				     unsigned int pos, bool *stopped);

/*
 * Inlined into the read actor, which saves a call on every read; the skbs of a fragment
 * list, rare, recurse through riw_skb_walk_frag_list().
 */
static __always_inline size_t riw_skb_walk(struct riw_sock_reader *reader,
					   const struct sk_buff *skb, unsigned int offset,
					   size_t len, bool *stopped)
{
	unsigned int pos = skb_headlen(skb);
	size_t taken = 0, used;
	int i;

	if (offset < pos) {
		used = riw_read_run(reader, skb->data + offset,
				    min_t(size_t, pos - offset, len), stopped);
		taken += used;
		offset += used;
		len -= used;
	}
	for (i = 0; i < skb_shinfo(skb)->nr_frags && len && !*stopped; i++) {
		const skb_frag_t *frag = &skb_shinfo(skb)->frags[i];
		unsigned int size = skb_frag_size(frag);

		while (offset < pos + size && len && !*stopped) {
			/* A fragment may span the pages of a compound page. */
			unsigned int in_frag = skb_frag_off(frag) + (offset - pos);
			unsigned int in_page = offset_in_page(in_frag);
			size_t n = min3((size_t)(pos + size - offset), len,
					(size_t)(PAGE_SIZE - in_page));
			u8 *va = kmap_local_page(skb_frag_page(frag) + in_frag / PAGE_SIZE);

			used = riw_read_run(reader, va + in_page, n, stopped);
			kunmap_local(va);
			taken += used;
			offset += used;
			len -= used;
		}
		pos += size;
	}
	if (skb_has_frag_list(skb) && len && !*stopped)
		taken += riw_skb_walk_frag_list(reader, skb, offset, len, pos, stopped);
	return taken;
}

/* The rest of riw_skb_walk(): from `pos`, where the fragment list begins. */
static noinline size_t riw_skb_walk_frag_list(struct riw_sock_reader *reader,
					      const struct sk_buff *skb, unsigned int offset,
					      size_t len, unsigned int pos, bool *stopped)
{
	const struct sk_buff *frag_iter;
	size_t taken = 0, used;

	skb_walk_frags(skb, frag_iter) {
		if (!len || *stopped)
			break;
		if (offset < pos + frag_iter->len) {
			used = riw_skb_walk(reader, frag_iter, offset - pos,
					    min_t(size_t, pos + frag_iter->len - offset, len),
					    stopped);
			taken += used;
			offset += used;
			len -= used;
		}
		pos += frag_iter->len;
	}
	return taken;
}

/* tcp_read_sock()'s actor: the skb's bytes to the reader, until it stops. */
static int riw_sock_read_actor(read_descriptor_t *desc, struct sk_buff *skb,
			       unsigned int offset, size_t len)
{
	struct riw_sock_reader *reader = desc->arg.data;
	bool stopped = false;
	size_t taken;

	/* A reader that stopped takes nothing more of this call of tcp_read_sock(). */
	if (!desc->count)
		return 0;
	taken = riw_skb_walk(reader, skb, offset, len, &stopped);
	if (stopped)
		desc->count = 0;
	return taken;
}

/*
 * Nothing to read and nothing else to find by reading: no bytes, no end of stream, no
 * error. The fields are read as tcp_poll() reads them, so the socket's lock is not needed;
 * a caller that holds it gets an answer nothing can change meanwhile.
 */
bool riw_sock_nothing_to_read(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return READ_ONCE(tp->rcv_nxt) == READ_ONCE(tp->copied_seq) &&
	       !(READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) && !READ_ONCE(sk->sk_err);
}

int riw_sock_read_locked(struct sock *sk, riw_sock_chunk_fn fn, void *ctx, bool *drained)
{
	struct riw_sock_reader reader = { .fn = fn, .ctx = ctx };
	read_descriptor_t desc = { .count = 1, .arg.data = &reader };
	int ret;

	ret = tcp_read_sock(sk, &desc, riw_sock_read_actor);
	/* Nothing taken and the reader did not stop it: empty, at its end, or failed. */
	if (ret == 0 && desc.count) {
		ret = sock_error(sk);
		if (ret == 0 && !((READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) &&
				  skb_queue_empty(&sk->sk_receive_queue)))
			ret = -EAGAIN;
	}
	*drained = riw_sock_nothing_to_read(sk);
	return ret;
}

void riw_sock_lock(struct socket *sock)
{
	lock_sock(sock->sk);
}

void riw_sock_unlock(struct socket *sock)
{
	release_sock(sock->sk);
}

int riw_sock_recv(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = {};
	struct kvec iov = { .iov_base = buf, .iov_len = len };

	return kernel_recvmsg(sock, &msg, &iov, 1, len, MSG_DONTWAIT);
}

unsigned int riw_sock_mss(struct socket *sock)
{
	return READ_ONCE(tcp_sk(sock->sk)->mss_cache);
}

void riw_sock_setup(struct socket *sock)
{
	tcp_sock_set_nodelay(sock->sk);
	sock_set_reuseaddr(sock->sk);
}

void riw_sock_no_linger(struct socket *sock)
{
	sock_no_linger(sock->sk);
}

int riw_sock_bind_to_netdev(struct socket *sock, struct net_device *ndev)
{
	return sock_bindtoindex(sock->sk, ndev->ifindex, true);
}

static int riw_sockaddr_len(const struct sockaddr_storage *addr)
{
	return addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					     sizeof(struct sockaddr_in);
}

int riw_sock_connect(struct socket *sock, struct sockaddr_storage *addr)
{
	return kernel_connect(sock, (struct sockaddr *)addr, riw_sockaddr_len(addr), O_NONBLOCK);
}

int riw_sock_bind(struct socket *sock, struct sockaddr_storage *addr)
{
	return kernel_bind(sock, (struct sockaddr *)addr, riw_sockaddr_len(addr));
}

int riw_sock_name(struct socket *sock, struct sockaddr_storage *addr, bool peer)
{
	int ret = peer ? kernel_getpeername(sock, (struct sockaddr *)addr) :
			 kernel_getsockname(sock, (struct sockaddr *)addr);

	return ret < 0 ? ret : 0;
}

int riw_sock_accept(struct socket *sock, struct socket **res)
{
	return kernel_accept(sock, res, O_NONBLOCK);
}

int riw_sock_listen(struct socket *sock, int backlog)
{
	return kernel_listen(sock, backlog);
}

/*
 * Zero-copy transmission. TCP takes a page reference for every piece of a zero-copy send
 * and a reference on its ubuf_info for every skb holding such pieces; the sender holds one
 * more until it is done sending. The last reference dropped means TCP needs none of the
 * pages any more (sent and acknowledged, or the connection gone): the owner hears of it.
 */
struct riw_zc {
	struct ubuf_info ubuf;
	riw_zc_released_fn released;
	void *owner;
	u64 token;
	/* Some skb's pieces were copied on their way (delivery to a local socket does). */
	bool copied;
};

static void riw_zc_complete(struct sk_buff *skb, struct ubuf_info *uarg, bool success)
{
	struct riw_zc *zc = container_of(uarg, struct riw_zc, ubuf);
	riw_zc_released_fn released = zc->released;
	void *owner = zc->owner;
	u64 token = zc->token;
	bool copied;

	if (!success)
		WRITE_ONCE(zc->copied, true);
	if (!refcount_dec_and_test(&uarg->refcnt))
		return;
	copied = READ_ONCE(zc->copied);
	kfree(zc);
	/* riw_release_exit() waits for this section before the module goes. */
	rcu_read_lock();
	released(owner, token, copied);
	rcu_read_unlock();
}

static const struct ubuf_info_ops riw_zc_ops = {
	.complete = riw_zc_complete,
};

struct riw_zc *riw_zc_new(riw_zc_released_fn released, void *owner, u64 token)
{
	struct riw_zc *zc = kmalloc(sizeof(*zc), GFP_KERNEL);

	if (!zc)
		return NULL;
	zc->ubuf.ops = &riw_zc_ops;
	zc->ubuf.flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
	refcount_set(&zc->ubuf.refcnt, 1);
	zc->released = released;
	zc->owner = owner;
	zc->token = token;
	zc->copied = false;
	return zc;
}

void riw_zc_put(struct riw_zc *zc)
{
	net_zcopy_put(&zc->ubuf);
}

/* Pieces of pinned memory per sendmsg call; an FPDU's payload rarely spans more. */
#define RIW_ZC_PIECES 16

/*
 * Hands `len` bytes at `offset` of the umem to TCP without copying them, without
 * blocking; returns the bytes TCP took (fewer if it is full), -EAGAIN if none.
 */
long riw_sock_send_umem(struct socket *sock, struct riw_umem *mem, size_t offset, size_t len,
			struct riw_zc *zc, bool more)
{
	struct bio_vec pieces[RIW_ZC_PIECES];
	long sent = 0;
	size_t pos;

	if (offset > mem->umem->length || len > mem->umem->length - offset)
		return -EINVAL;
	pos = offset + mem->first;
	while (len) {
		struct msghdr msg = {
			.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_ZEROCOPY,
			.msg_ubuf = &zc->ubuf,
		};
		size_t count = 0, bytes = 0;
		int ret;

		while (count < RIW_ZC_PIECES && bytes < len) {
			unsigned long index = (pos + bytes) >> PAGE_SHIFT;
			size_t in_page = offset_in_page(pos + bytes);
			size_t n = min_t(size_t, len - bytes, PAGE_SIZE - in_page);

			if (WARN_ON_ONCE(index >= mem->npages))
				return sent ? sent : -EFAULT;
			bvec_set_page(&pieces[count++], mem->pages[index], n, in_page);
			bytes += n;
		}
		if (more || bytes < len)
			msg.msg_flags |= MSG_MORE;
		iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, pieces, count, bytes);
		ret = sock_sendmsg(sock, &msg);
		if (ret < 0)
			return sent ? sent : ret;
		sent += ret;
		pos += ret;
		len -= ret;
		if (ret < bytes)
			break;
	}
	return sent;
}
