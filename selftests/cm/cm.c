// SPDX-License-Identifier: GPL-2.0
/*
 * The librdmacm part of riw_cm.sh: connection management and the data path (SEND/RECV,
 * RDMA Write and Read) through stock librdmacm and libibverbs (soft-iWARP provider), on riw
 * or siw devices.
 *
 *   cm list                     the subtest names and descriptions, one a line
 *   cm run NS_SRV NS_CLI SRV_DRIVER CLI_DRIVER [NAME...]
 *                               run the subtests (all without NAME); both sides of every
 *                               connection live in this one process: it enters the server's
 *                               network namespace (/run/netns/NS_SRV) to create the server's
 *                               rdma_cm ids and the client's to create the client's (an
 *                               rdma_cm id belongs to the namespace it was created in)
 *   cm serve ADDR PORT          a listener that accepts every request and answers each
 *                               message "ping..." with "pong..."; prints its events; runs
 *                               until killed (SIGTERM: tidy exit, status 0). A request
 *                               whose private data starts "hello first" gets a Send of
 *                               "hello" as soon as the connection is ESTABLISHED
 *   cm ping ADDR PORT [N]       a client: N (default 1) connections one after the other,
 *                               each connects, sends "ping", waits for "pong", disconnects
 *   cm hold ADDR PORT           a client that connects, prints "ESTABLISHED", and waits for
 *                               DISCONNECTED or DEVICE_REMOVAL (printed, then exit 0)
 *
 * `run` prints one line "RESULT pass|fail|xfail|skip NAME [reason]" per subtest; any other
 * line is diagnostics. SRV_DRIVER and CLI_DRIVER (riw or siw) only select the expected
 * failures: where siw deviates from what riw must do, the check still runs and reports
 * "xfail" when siw is on the deviating side.
 *
 * Addresses: the server device sits on 192.0.2.2 / 2001:db8::2, the client device on
 * 192.0.2.1 / 2001:db8::1 (riw_cm.sh sets them up). Every subtest uses ports of its own,
 * from 20000 up. Timeouts are multiplied by RIW_TIMEOUT_SCALE. A subtest still running
 * after SUBTEST_LIMIT seconds (scaled) fails and ends `run`: the subtests after it then have
 * no result, which the shell counts as failures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SRV4 "192.0.2.2"
#define CLI4 "192.0.2.1"
#define SRV6 "2001:db8::2"
#define BUF_SIZE 65536
#define MSG 256 /* bytes per receive buffer slot */
#define SLOTS 16

static int scale = 1;
static int ns_srv = -1, ns_cli = -1;
static const char *drv_srv = "riw", *drv_cli = "riw";
static struct rdma_event_channel *ch_srv, *ch_cli;
static int port_next = 20000;

/*
 * A window in which nothing must happen is scaled at most this much: on a slow kernel it
 * only has to be long enough for what should not come to show up, not for what should.
 */
#define QUIET_SCALE_MAX 3

static double quiet_secs(int ms)
{
	return ms * (scale < QUIET_SCALE_MAX ? scale : QUIET_SCALE_MAX) / 1000.0;
}

/* ---- results ---- */

static int n_fail, n_xfail;
static char xfail_why[512];

static void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* A check; on failure, xfail if `drv` (the driver of the deviating side) is siw and why is
 * given. Returns cond. */
static bool check_x(bool cond, const char *drv, const char *why, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (cond)
		return true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (why && drv && !strcmp(drv, "siw")) {
		diag("XFAIL: %s (%s)", msg, why);
		if (!strstr(xfail_why, why)) {
			if (xfail_why[0])
				strncat(xfail_why, "; ", sizeof(xfail_why) - strlen(xfail_why) - 1);
			strncat(xfail_why, why, sizeof(xfail_why) - strlen(xfail_why) - 1);
		}
		n_xfail++;
	} else {
		diag("FAIL: %s", msg);
		n_fail++;
	}
	return false;
}

#define check(cond, ...) check_x((cond), NULL, NULL, __VA_ARGS__)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void enter(int ns)
{
	if (ns >= 0 && setns(ns, CLONE_NEWNET)) {
		perror("setns");
		exit(2);
	}
}

/* ---- addresses ---- */

static socklen_t mkaddr(struct sockaddr_storage *ss, const char *ip, int port)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (void *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &s6->sin6_addr);
		return sizeof(*s6);
	}
	struct sockaddr_in *s4 = (void *)ss;

	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s4->sin_addr);
	return sizeof(*s4);
}

/* ---- rdma_cm events ---- */

static const char *ev_name(int e)
{
	return rdma_event_str(e);
}

/* The next event on ch within ms (scaled), or NULL. */
static struct rdma_cm_event *get_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	double end = now() + ms * scale / 1000.0;

	for (;;) {
		int left = (int)((end - now()) * 1000);

		if (left < 0)
			left = 0;
		int r = poll(&p, 1, left);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return NULL;
		if (rdma_get_cm_event(ch, &ev) == 0)
			return ev;
		if (errno != EAGAIN)
			return NULL;
	}
}

/* An event of type `type` on ch within ms, for id (NULL: any). Anything else fails the check
 * and is returned too (the caller acks it); NULL on timeout. */
static struct rdma_cm_event *expect_ev(struct rdma_event_channel *ch, int type, int ms,
				       const char *what)
{
	struct rdma_cm_event *ev = get_event(ch, ms);

	if (!ev) {
		check(0, "%s: no %s within %d ms", what, ev_name(type), ms * scale);
		return NULL;
	}
	check((int)ev->event == type, "%s: got %s (status %d), want %s", what, ev_name(ev->event),
	      ev->status, ev_name(type));
	return ev;
}

/* No event on ch for ms. */
static bool expect_quiet(struct rdma_event_channel *ch, int ms, const char *what)
{
	struct rdma_cm_event *ev = get_event(ch, ms);

	if (!ev)
		return true;
	check(0, "%s: unexpected %s (status %d)", what, ev_name(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	return false;
}

/* ---- one end of a connection ---- */

struct end {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	char *buf;
	int armed; /* events outstanding for ibv_ack_cq_events */
};

struct opts {
	const char *listen_ip; /* bind address of the listener ("0.0.0.0", "::", ...) */
	const char *dst_ip;
	int backlog;
	bool srq;		/* the server's QP takes its receives from an SRQ */
	int recvs;		/* receives each side posts before connecting */
	const void *req_pd;	/* private data of the request */
	int req_pd_len;
	const void *rep_pd;	/* of the accept */
	int rep_pd_len;
	int cli_rr, cli_id;	/* client's responder_resources (IRD), initiator_depth (ORD) */
	int srv_rr, srv_id;
};

struct pair {
	struct rdma_cm_id *listener;
	struct end c, s;
	int port;
	/* what the CONNECT_REQUEST and ESTABLISHED events carried */
	unsigned char req_pd[512], rep_pd[512];
	int req_pd_len, rep_pd_len;
	int req_rr, req_id, est_rr, est_id;
};

static int setup_end(struct end *e, struct rdma_cm_id *id, bool srq, int recvs)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};

	e->id = id;
	e->pd = ibv_alloc_pd(id->verbs);
	e->cc = ibv_create_comp_channel(id->verbs);
	if (!e->pd || !e->cc)
		return -1;
	e->cq = ibv_create_cq(id->verbs, 128, NULL, e->cc, 0);
	if (!e->cq)
		return -1;
	if (srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 32, .max_sge = 1 } };

		e->srq = ibv_create_srq(e->pd, &sa);
		if (!e->srq)
			return -1;
		qa.srq = e->srq;
		qa.cap.max_recv_wr = 0;
		qa.cap.max_recv_sge = 0;
	}
	qa.send_cq = qa.recv_cq = e->cq;
	if (rdma_create_qp(id, e->pd, &qa))
		return -1;
	e->buf = aligned_alloc(4096, BUF_SIZE);
	memset(e->buf, 0, BUF_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!e->mr)
		return -1;
	for (int i = 0; i < recvs; i++) {
		struct ibv_sge sge = { (uintptr_t)e->buf + (i % SLOTS) * MSG, MSG, e->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int rc = srq ? ibv_post_srq_recv(e->srq, &wr, &bad) : ibv_post_recv(id->qp, &wr, &bad);

		if (rc) {
			errno = rc;
			return -1;
		}
	}
	return 0;
}

static void free_end(struct end *e)
{
	if (e->id && e->id->qp)
		rdma_destroy_qp(e->id);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->srq)
		ibv_destroy_srq(e->srq);
	if (e->cq) {
		if (e->armed)
			ibv_ack_cq_events(e->cq, e->armed);
		ibv_destroy_cq(e->cq);
	}
	if (e->cc)
		ibv_destroy_comp_channel(e->cc);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	free(e->buf);
	if (e->id)
		rdma_destroy_id(e->id);
	memset(e, 0, sizeof(*e));
}

static void free_pair(struct pair *p)
{
	free_end(&p->c);
	free_end(&p->s);
	if (p->listener)
		rdma_destroy_id(p->listener);
	p->listener = NULL;
	/* Leftover events of destroyed ids. */
	struct rdma_cm_event *ev;

	while ((ev = get_event(ch_srv, 0)))
		rdma_ack_cm_event(ev);
	while ((ev = get_event(ch_cli, 0)))
		rdma_ack_cm_event(ev);
}

static struct rdma_cm_id *listen_on(const char *ip, int port, int backlog, int *err)
{
	struct rdma_cm_id *id;
	struct sockaddr_storage ss;

	enter(ns_srv);
	*err = 0;
	if (rdma_create_id(ch_srv, &id, NULL, RDMA_PS_TCP)) {
		*err = errno;
		return NULL;
	}
	mkaddr(&ss, ip, port);
	if (rdma_bind_addr(id, (struct sockaddr *)&ss) || rdma_listen(id, backlog)) {
		*err = errno;
		rdma_destroy_id(id);
		return NULL;
	}
	return id;
}

/* Client id, address and route resolved; NULL (after a failed check) otherwise. */
static struct rdma_cm_id *resolve(const char *dst, int port)
{
	struct rdma_cm_id *id;
	struct sockaddr_storage ss;
	struct rdma_cm_event *ev;

	enter(ns_cli);
	if (!check(!rdma_create_id(ch_cli, &id, NULL, RDMA_PS_TCP), "rdma_create_id: %m"))
		return NULL;
	mkaddr(&ss, dst, port);
	if (!check(!rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, 2000 * scale),
		   "rdma_resolve_addr %s: %m", dst))
		goto err;
	ev = expect_ev(ch_cli, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, "resolve_addr");
	if (!ev || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
		if (ev)
			rdma_ack_cm_event(ev);
		goto err;
	}
	rdma_ack_cm_event(ev);
	if (!check(!rdma_resolve_route(id, 2000 * scale), "rdma_resolve_route: %m"))
		goto err;
	ev = expect_ev(ch_cli, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, "resolve_route");
	if (!ev || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		if (ev)
			rdma_ack_cm_event(ev);
		goto err;
	}
	rdma_ack_cm_event(ev);
	return id;
err:
	rdma_destroy_id(id);
	return NULL;
}

static void conn_param(struct rdma_conn_param *cp, const void *pd, int len, int rr, int id)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = pd;
	cp->private_data_len = len;
	cp->responder_resources = rr;
	cp->initiator_depth = id;
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

/* Client: resolve, QP, connect (no waiting). */
static bool start_connect(struct pair *p, const struct opts *o)
{
	struct rdma_conn_param cp;
	struct rdma_cm_id *id = resolve(o->dst_ip ? o->dst_ip : SRV4, p->port);

	if (!id)
		return false;
	if (!check(!setup_end(&p->c, id, false, o->recvs), "client QP: %m")) {
		if (!p->c.id)
			rdma_destroy_id(id);
		return false;
	}
	conn_param(&cp, o->req_pd, o->req_pd_len, o->cli_rr ?: 1, o->cli_id ?: 1);
	return check(!rdma_connect(id, &cp), "rdma_connect: %m");
}

/* Server: take the CONNECT_REQUEST, set up its QP, accept. */
static bool accept_one(struct pair *p, const struct opts *o)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev = expect_ev(ch_srv, RDMA_CM_EVENT_CONNECT_REQUEST, 10000,
					     "server");

	if (!ev)
		return false;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rdma_ack_cm_event(ev);
		return false;
	}
	p->req_pd_len = ev->param.conn.private_data_len;
	if (p->req_pd_len > (int)sizeof(p->req_pd))
		p->req_pd_len = sizeof(p->req_pd);
	if (ev->param.conn.private_data)
		memcpy(p->req_pd, ev->param.conn.private_data, p->req_pd_len);
	p->req_rr = ev->param.conn.responder_resources;
	p->req_id = ev->param.conn.initiator_depth;
	struct rdma_cm_id *id = ev->id;

	rdma_ack_cm_event(ev);
	if (!check(!setup_end(&p->s, id, o->srq, o->recvs), "server QP: %m")) {
		if (!p->s.id)
			rdma_destroy_id(id);
		return false;
	}
	conn_param(&cp, o->rep_pd, o->rep_pd_len, o->srv_rr ?: 1, o->srv_id ?: 1);
	return check(!rdma_accept(id, &cp), "rdma_accept: %m");
}

static bool wait_established(struct pair *p)
{
	struct rdma_cm_event *ev = expect_ev(ch_cli, RDMA_CM_EVENT_ESTABLISHED, 10000, "client");
	bool ok = ev && ev->event == RDMA_CM_EVENT_ESTABLISHED;

	if (ev) {
		p->rep_pd_len = ev->param.conn.private_data_len;
		if (p->rep_pd_len > (int)sizeof(p->rep_pd))
			p->rep_pd_len = sizeof(p->rep_pd);
		if (ev->param.conn.private_data)
			memcpy(p->rep_pd, ev->param.conn.private_data, p->rep_pd_len);
		p->est_rr = ev->param.conn.responder_resources;
		p->est_id = ev->param.conn.initiator_depth;
		check(ev->status == 0, "client ESTABLISHED status %d", ev->status);
		rdma_ack_cm_event(ev);
	}
	ev = expect_ev(ch_srv, RDMA_CM_EVENT_ESTABLISHED, 10000, "server");
	if (ev) {
		ok = ok && ev->event == RDMA_CM_EVENT_ESTABLISHED;
		rdma_ack_cm_event(ev);
	} else {
		ok = false;
	}
	return ok;
}

/* A connected pair; false after failed checks (free_pair cleans up either way). */
static bool open_pair(struct pair *p, const struct opts *o)
{
	int err;

	memset(p, 0, sizeof(*p));
	p->port = port_next++;
	p->listener = listen_on(o->listen_ip ? o->listen_ip : SRV4, p->port, o->backlog ?: 8,
				&err);
	if (!check(p->listener, "listen on %s port %d: %s", o->listen_ip ? o->listen_ip : SRV4,
		   p->port, strerror(err)))
		return false;
	return start_connect(p, o) && accept_one(p, o) && wait_established(p);
}

/* Graceful: the client disconnects, both get DISCONNECTED. */
static bool close_pair(struct pair *p)
{
	struct rdma_cm_event *ev;
	bool ok = true;

	if (!check(!rdma_disconnect(p->c.id), "rdma_disconnect: %m"))
		return false;
	ev = expect_ev(ch_cli, RDMA_CM_EVENT_DISCONNECTED, 10000, "client disconnect");
	ok = ev && ev->event == RDMA_CM_EVENT_DISCONNECTED;
	if (ev)
		rdma_ack_cm_event(ev);
	ev = expect_ev(ch_srv, RDMA_CM_EVENT_DISCONNECTED, 10000, "server disconnect");
	ok = ok && ev && ev->event == RDMA_CM_EVENT_DISCONNECTED;
	if (ev)
		rdma_ack_cm_event(ev);
	return ok;
}

/* ---- the data path ---- */

static int post_send(struct end *e, uint64_t wr_id, int off, int len, int flags, bool nosge)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = nosge ? NULL : &sge,
				  .num_sge = nosge ? 0 : 1, .opcode = IBV_WR_SEND,
				  .send_flags = flags }, *bad;

	return ibv_post_send(e->id->qp, &wr, &bad);
}

static int post_recv(struct end *e, uint64_t wr_id, int off, int len)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return e->srq ? ibv_post_srq_recv(e->srq, &wr, &bad) : ibv_post_recv(e->id->qp, &wr, &bad);
}

/* Poll up to n completions within secs into wc; returns how many. */
static int poll_n_secs(struct end *e, struct ibv_wc *wc, int n, double secs)
{
	int got = 0;
	double end = now() + secs;

	while (got < n) {
		int r = ibv_poll_cq(e->cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		if (got < n) {
			if (now() > end)
				break;
			usleep(1000);
		}
	}
	return got;
}

/* Poll up to n completions within ms (scaled) into wc; returns how many. */
static int poll_n(struct end *e, struct ibv_wc *wc, int n, int ms)
{
	return poll_n_secs(e, wc, n, ms * scale / 1000.0);
}

static const char *st(int s)
{
	return ibv_wc_status_str(s);
}

/* Exactly one completion within ms, with these fields (byte_len < 0: any). */
static bool expect_wc(struct end *e, const char *what, uint64_t wr_id, int status, int opcode,
		      int byte_len, struct ibv_wc *out)
{
	struct ibv_wc wc;

	if (!check(poll_n(e, &wc, 1, 5000) == 1, "%s: no completion", what))
		return false;
	if (out)
		*out = wc;
	diag("%s: wr_id %llu status %s opcode %d byte_len %u flags 0x%x", what,
	     (unsigned long long)wc.wr_id, st(wc.status), wc.opcode, wc.byte_len, wc.wc_flags);
	bool ok = check(wc.wr_id == wr_id, "%s: wr_id %llu, want %llu", what,
			(unsigned long long)wc.wr_id, (unsigned long long)wr_id);

	ok &= check(wc.status == (unsigned)status, "%s: status %s, want %s", what,
		    st(wc.status), st(status));
	if (wc.status == IBV_WC_SUCCESS) {
		ok &= check(wc.opcode == (unsigned)opcode, "%s: opcode %d, want %d", what,
			    wc.opcode, opcode);
		if (byte_len >= 0)
			ok &= check(wc.byte_len == (unsigned)byte_len, "%s: byte_len %u, want %d",
				    what, wc.byte_len, byte_len);
	}
	return ok;
}

static bool expect_no_wc(struct end *e, const char *what, int ms)
{
	struct ibv_wc wc;

	if (poll_n_secs(e, &wc, 1, quiet_secs(ms)) == 0)
		return true;
	check(0, "%s: unexpected completion wr_id %llu status %s opcode %d", what,
	      (unsigned long long)wc.wr_id, st(wc.status), wc.opcode);
	return false;
}

/*
 * Completion events on e's channel: returns how many arrived (each acked later), waiting
 * until more than want have, or ms. An event is raised as its completion is written, so a
 * caller that wants one stops at it, and what came with it is counted too: only a window
 * that wants none lasts its whole length (a quiet window, see QUIET_SCALE_MAX).
 */
static int count_cq_events(struct end *e, int ms, int want)
{
	struct pollfd pf = { .fd = e->cc->fd, .events = POLLIN };
	int n = 0, fl = fcntl(e->cc->fd, F_GETFL);
	double end = now() + (want ? ms * scale / 1000.0 : quiet_secs(ms));

	fcntl(e->cc->fd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		struct ibv_cq *cq;
		void *ctx;
		int left = (int)((end - now()) * 1000);

		if (left < 0)
			left = 0;
		if (poll(&pf, 1, left) <= 0)
			break;
		while (ibv_get_cq_event(e->cc, &cq, &ctx) == 0) {
			n++;
			e->armed++;
		}
		if (n >= (want ? want : 1))
			break;
	}
	fcntl(e->cc->fd, F_SETFL, fl);
	return n;
}

static void fill(char *p, int len, int seed)
{
	for (int i = 0; i < len; i++)
		p[i] = (char)(seed * 31 + i * 7 + 1);
}

/* ---- subtests ---- */

static void connect_and_close(const char *listen_ip, const char *dst)
{
	struct pair p;
	struct opts o = { .listen_ip = listen_ip, .dst_ip = dst, .recvs = 1 };

	if (open_pair(&p, &o)) {
		/* One message each way proves the QPs reached RTS. */
		fill(p.c.buf + 8192, 100, 1);
		check(!post_send(&p.c, 1, 8192, 100, IBV_SEND_SIGNALED, false), "post_send");
		expect_wc(&p.c, "client send", 1, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_wc(&p.s, "server recv", 1000, IBV_WC_SUCCESS, IBV_WC_RECV, 100, NULL);
		check(!memcmp(p.s.buf, p.c.buf + 8192, 100), "data differs");
		fill(p.s.buf + 8192, 100, 2);
		check(!post_send(&p.s, 2, 8192, 100, IBV_SEND_SIGNALED, false), "post_send");
		expect_wc(&p.s, "server send", 2, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_wc(&p.c, "client recv", 1000, IBV_WC_SUCCESS, IBV_WC_RECV, 100, NULL);
		check(!memcmp(p.c.buf, p.s.buf + 8192, 100), "data differs");
		close_pair(&p);
	}
	free_pair(&p);
}

#define WILDCARD_XFAIL "siw binds a wildcard listener in the caller's namespace to its netdev's " \
		       "ifindex, which collides with the other namespace's veth of the same ifindex"

static bool wildcard_listen(const char *any, int port)
{
	int err;
	struct rdma_cm_id *l = listen_on(any, port, 8, &err);

	/* The deviating side is any siw device: siw listens on its own devices too. */
	const char *drv = !strcmp(drv_srv, "siw") ? drv_srv : drv_cli;

	if (l) {
		rdma_destroy_id(l);
		return true;
	}
	check_x(0, drv, WILDCARD_XFAIL, "wildcard listen on %s port %d: %s", any, port,
		strerror(err));
	return false;
}

static void t_listen_v4_wildcard(void)
{
	if (wildcard_listen("0.0.0.0", port_next))
		connect_and_close("0.0.0.0", SRV4);
}

static void t_listen_v4_specific(void)
{
	connect_and_close(SRV4, SRV4);
}

static void t_listen_v6_wildcard(void)
{
	if (wildcard_listen("::", port_next))
		connect_and_close("::", SRV6);
}

static void t_listen_v6_specific(void)
{
	connect_and_close(SRV6, SRV6);
}

/* A TCP connect from the client namespace: 0, or the errno. */
static int tcp_probe(const char *ip, int port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, ip, port);
	int s, rc = 0;

	enter(ns_cli);
	s = socket(ss.ss_family, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&ss, len))
		rc = errno;
	close(s);
	return rc;
}

static void t_listen_destroy(void)
{
	int port = port_next++, err, rc;
	struct rdma_cm_id *l = listen_on(SRV4, port, 8, &err);

	if (!check(l, "listen: %s", strerror(err)))
		return;
	rdma_destroy_id(l);
	rc = tcp_probe(SRV4, port);
	check(rc == ECONNREFUSED, "TCP connect after destroy_listen: %s, want ECONNREFUSED",
	      strerror(rc));
	/* The same port listens again at once, and serves. */
	port_next = port;
	connect_and_close(SRV4, SRV4);
}

static void t_backlog(void)
{
	enum { N = 4 };
	struct pair p[N];
	struct opts o = { .recvs = 1 };
	int err, port = port_next++;
	struct rdma_cm_id *l = listen_on(SRV4, port, N, &err);

	memset(p, 0, sizeof(p));
	if (!check(l, "listen backlog %d: %s", N, strerror(err)))
		return;
	/* N requests at once against a backlog of N; the server takes them late. (Beyond the
	 * backlog, rdma_cm's ucma rejects and iw_cm drops requests itself: not the driver's.) */
	for (int i = 0; i < N; i++) {
		p[i].port = port;
		start_connect(&p[i], &o);
	}
	sleep(1);
	int est = 0, req = 0;
	double end = now() + 20.0 * scale;

	while ((req < N || est < 2 * N) && now() < end) {
		struct rdma_cm_event *ev;

		while ((ev = get_event(ch_srv, 0))) {
			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && req < N) {
				struct rdma_cm_id *id = ev->id;
				struct rdma_conn_param cp;

				rdma_ack_cm_event(ev);
				conn_param(&cp, NULL, 0, 1, 1);
				if (check(!setup_end(&p[req].s, id, false, 1), "server QP: %m"))
					check(!rdma_accept(id, &cp), "rdma_accept: %m");
				req++;
				continue;
			}
			if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
				est++;
			else
				check(0, "server: %s status %d", ev_name(ev->event), ev->status);
			rdma_ack_cm_event(ev);
		}
		while ((ev = get_event(ch_cli, 0))) {
			if (ev->event == RDMA_CM_EVENT_ESTABLISHED)
				est++;
			else
				check(0, "client: %s status %d", ev_name(ev->event), ev->status);
			rdma_ack_cm_event(ev);
		}
		usleep(10000);
	}
	diag("%d requests, %d of %d ESTABLISHED events", req, est, 2 * N);
	check(req == N && est == 2 * N, "all %d connections established through a backlog of %d",
	      N, N);
	for (int i = 0; i < N; i++) {
		free_end(&p[i].c);
		free_end(&p[i].s);
	}
	rdma_destroy_id(l);
	free_pair(&(struct pair){ 0 });
}

static void t_refused(void)
{
	struct pair p = { .port = port_next++ };
	struct opts o = { .recvs = 1 };
	struct rdma_conn_param cp;
	struct rdma_cm_id *id = resolve(SRV4, p.port);

	if (!id)
		return;
	if (check(!setup_end(&p.c, id, false, 1), "client QP: %m")) {
		conn_param(&cp, NULL, 0, 1, 1);
		int rc = rdma_connect(id, &cp) ? errno : 0;

		diag("rdma_connect to a port without listener: %s", rc ? strerror(rc) : "ok");
		if (rc == 0) {
			struct rdma_cm_event *ev = expect_ev(ch_cli, RDMA_CM_EVENT_REJECTED, 10000,
							     "client");
			if (ev) {
				check(ev->status == -ECONNREFUSED, "REJECTED status %d, want %d",
				      ev->status, -ECONNREFUSED);
				rdma_ack_cm_event(ev);
			}
		} else {
			check(rc == ECONNREFUSED, "rdma_connect: %s, want ECONNREFUSED",
			      strerror(rc));
		}
	} else if (!p.c.id) {
		rdma_destroy_id(id);
	}
	(void)o;
	free_pair(&p);
}

/* A plain TCP listener in the server namespace that never speaks MPA. */
static int raw_listener(int port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, SRV4, port);
	int one = 1, s;

	enter(ns_srv);
	s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&ss, len) || listen(s, 8)) {
		close(s);
		return -1;
	}
	return s;
}

/*
 * Closes a raw listener after its queued connections, each closed on its own. Closing a
 * listener with connections still queued has the kernel take each one's callback lock
 * under the listener's spinlock; lockdep reports that as a lock-order problem whenever
 * an earlier user (siw's socket callbacks, in an earlier suite of the same boot) took
 * the callback lock with softirqs enabled. Neither is riw's to fix.
 */
static void close_raw_listener(int ls)
{
	int s;

	fcntl(ls, F_SETFL, fcntl(ls, F_GETFL) | O_NONBLOCK);
	while ((s = accept(ls, NULL, NULL)) >= 0)
		close(s);
	close(ls);
}

/* The kernel log from now on: a descriptor at its end, for kmsg_find(). */
static int kmsg_from_now(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* The text of the first kernel log record since kmsg_from_now() that holds text, into
 * rec (of size len); false if none does. */
static bool kmsg_find(int fd, const char *text, char *rec, size_t len)
{
	ssize_t n;

	while (fd >= 0 && (n = read(fd, rec, len - 1)) != 0) {
		if (n < 0 && errno == EPIPE)
			continue; /* records overwritten meanwhile */
		if (n < 0)
			break; /* EAGAIN: no more */
		rec[n] = 0;
		if (strstr(rec, text)) {
			char *msg = strchr(rec, ';');

			if (msg)
				memmove(rec, msg + 1, strlen(msg));
			rec[strcspn(rec, "\n")] = 0;
			return true;
		}
	}
	return false;
}

static void t_timeout(void)
{
	struct pair p = { .port = port_next++ };
	struct rdma_conn_param cp;
	int ls = raw_listener(p.port);
	const int bound = 30; /* seconds, scaled */

	if (!check(ls >= 0, "raw listener: %m"))
		return;
	struct rdma_cm_id *id = resolve(SRV4, p.port);

	if (id && check(!setup_end(&p.c, id, false, 1), "client QP: %m")) {
		conn_param(&cp, "hello?", 6, 1, 1);
		double t0 = now();
		int kmsg = kmsg_from_now();

		if (check(!rdma_connect(id, &cp), "rdma_connect: %m")) {
			struct rdma_cm_event *ev = expect_ev(ch_cli, RDMA_CM_EVENT_UNREACHABLE,
							     bound * 1000, "client");
			if (ev) {
				diag("%s status %d after %.1f s", ev_name(ev->event), ev->status,
				     now() - t0);
				check(ev->status == -ETIMEDOUT, "status %d, want %d", ev->status,
				      -ETIMEDOUT);
				rdma_ack_cm_event(ev);
				/* The event says only -ETIMEDOUT; riw's log says why. */
				char line[96], rec[2048];

				snprintf(line, sizeof(line),
					 "peer %s:%d not connected: no MPA exchange in time", SRV4,
					 p.port);
				if (!strcmp(drv_cli, "riw") &&
				    check(kmsg_find(kmsg, line, rec, sizeof(rec)),
					  "no kernel log line \"%s\"", line))
					diag("kernel log: %s", rec);
			}
		}
		if (kmsg >= 0)
			close(kmsg);
	} else if (id && !p.c.id) {
		rdma_destroy_id(id);
	}
	close_raw_listener(ls);
	free_pair(&p);
}

/* The peer answers the MPA request with a TCP reset. */
static void t_reset_in_mpa(void)
{
	struct pair p = { .port = port_next++ };
	struct rdma_conn_param cp;
	int ls = raw_listener(p.port);

	if (!check(ls >= 0, "raw listener: %m"))
		return;
	struct rdma_cm_id *id = resolve(SRV4, p.port);

	if (id && check(!setup_end(&p.c, id, false, 1), "client QP: %m")) {
		conn_param(&cp, NULL, 0, 1, 1);
		if (check(!rdma_connect(id, &cp), "rdma_connect: %m")) {
			struct pollfd pf = { .fd = ls, .events = POLLIN };
			char req[64];

			if (check(poll(&pf, 1, 10000 * scale) == 1, "no TCP connection")) {
				int s = accept(ls, NULL, NULL);
				struct linger lg = { 1, 0 };

				pf.fd = s;
				poll(&pf, 1, 5000 * scale);
				int n = recv(s, req, sizeof(req), 0);

				diag("peer got %d bytes of MPA request, resets", n);
				setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				close(s);
			}
			struct rdma_cm_event *ev = get_event(ch_cli, 10000);

			if (check(ev, "client: no event after the reset")) {
				diag("%s status %d", ev_name(ev->event), ev->status);
				check(ev->event == RDMA_CM_EVENT_REJECTED ||
				      ev->event == RDMA_CM_EVENT_CONNECT_ERROR,
				      "%s, want REJECTED or CONNECT_ERROR", ev_name(ev->event));
				check(ev->status == -ECONNRESET, "status %d, want %d", ev->status,
				      -ECONNRESET);
				rdma_ack_cm_event(ev);
			}
		}
	} else if (id && !p.c.id) {
		rdma_destroy_id(id);
	}
	close_raw_listener(ls);
	free_pair(&p);
}

static void t_private_data(void)
{
	/* siw<->siw loses requests of 252 bytes and more (the listener's side rejects them
	 * before the application sees them): 240 is what siw carries. */
	static const int sizes[] = { 1, 56, 196, 240 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char req[512], rep[512];
		int n = sizes[i];
		struct pair p;

		fill((char *)req, n, 3 + i);
		fill((char *)rep, n, 5 + i);
		struct opts o = { .recvs = 1, .req_pd = req, .req_pd_len = n, .rep_pd = rep,
				  .rep_pd_len = n };

		if (open_pair(&p, &o)) {
			diag("%d bytes: request carried %d, reply %d", n, p.req_pd_len,
			     p.rep_pd_len);
			/* The CM may pad; what was sent must come first, intact. */
			check(p.req_pd_len >= n && !memcmp(p.req_pd, req, n),
			      "request private data of %d bytes: got %d bytes%s", n, p.req_pd_len,
			      p.req_pd_len >= n ? ", different" : "");
			check(p.rep_pd_len >= n && !memcmp(p.rep_pd, rep, n),
			      "reply private data of %d bytes: got %d bytes%s", n, p.rep_pd_len,
			      p.rep_pd_len >= n ? ", different" : "");
			close_pair(&p);
		} else {
			struct rdma_cm_event *ev = get_event(ch_cli, 6000);

			diag("%d bytes: client event %s status %d", n, ev ? ev_name(ev->event) : "none",
			     ev ? ev->status : 0);
			if (ev)
				rdma_ack_cm_event(ev);
		}
		free_pair(&p);
	}
}

static void t_reject(void)
{
	static const char why[] = "no thanks: riw_cm reject";
	struct pair p = { 0 };
	struct opts o = { .recvs = 1, .req_pd = "knock", .req_pd_len = 5 };
	int err;

	p.port = port_next++;
	p.listener = listen_on(SRV4, p.port, 8, &err);
	if (!check(p.listener, "listen: %s", strerror(err)))
		return;
	if (start_connect(&p, &o)) {
		struct rdma_cm_event *ev = expect_ev(ch_srv, RDMA_CM_EVENT_CONNECT_REQUEST, 10000,
						     "server");
		if (ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *id = ev->id;

			rdma_ack_cm_event(ev);
			check(!rdma_reject(id, why, sizeof(why)), "rdma_reject: %m");
			rdma_destroy_id(id);
			ev = expect_ev(ch_cli, RDMA_CM_EVENT_REJECTED, 10000, "client");
			if (ev) {
				int len = ev->param.conn.private_data_len;

				diag("%s status %d, %d bytes of private data", ev_name(ev->event),
				     ev->status, len);
				check(ev->status == -ECONNREFUSED || ev->status == -ECONNRESET,
				      "REJECTED status %d, want %d", ev->status, -ECONNREFUSED);
				check(len >= (int)sizeof(why) && ev->param.conn.private_data &&
				      !memcmp(ev->param.conn.private_data, why, sizeof(why)),
				      "reject private data not delivered intact (%d bytes)", len);
				rdma_ack_cm_event(ev);
			}
			expect_quiet(ch_srv, 500, "server after reject");
		} else if (ev) {
			rdma_ack_cm_event(ev);
		}
	}
	free_pair(&p);
	/* The listener still serves. */
	connect_and_close(SRV4, SRV4);
}

static void t_ird_ord(void)
{
	struct pair p;
	/* client: IRD 8 (responder_resources), ORD 4 (initiator_depth); server: IRD 2, ORD 8 */
	struct opts o = { .recvs = 1, .cli_rr = 8, .cli_id = 4, .srv_rr = 2, .srv_id = 8 };

	if (open_pair(&p, &o)) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		diag("CONNECT_REQUEST: responder_resources %d initiator_depth %d", p.req_rr,
		     p.req_id);
		diag("client ESTABLISHED: responder_resources %d initiator_depth %d", p.est_rr,
		     p.est_id);
		/* The server sees the client's ORD as what it must answer, its IRD as depth. */
		check(p.req_rr == 4, "request: responder_resources %d, want the client's ORD 4",
		      p.req_rr);
		check(p.req_id == 8, "request: initiator_depth %d, want the client's IRD 8",
		      p.req_id);
		ibv_query_qp(p.c.id->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC,
			     &ia);
		diag("client QP: ORD %d IRD %d", a.max_rd_atomic, a.max_dest_rd_atomic);
		ibv_query_qp(p.s.id->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC,
			     &ia);
		diag("server QP: ORD %d IRD %d", a.max_rd_atomic, a.max_dest_rd_atomic);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_send_signaled(void)
{
	struct pair p;
	struct opts o = { .recvs = 4 };

	if (open_pair(&p, &o)) {
		static const int lens[] = { 1, 100, MSG };

		for (int i = 0; i < 3; i++) {
			fill(p.c.buf + 8192 + i * MSG, lens[i], 10 + i);
			check(!post_send(&p.c, 10 + i, 8192 + i * MSG, lens[i], IBV_SEND_SIGNALED,
					 false), "post_send: %m");
		}
		for (int i = 0; i < 3; i++) {
			struct ibv_wc wc;

			expect_wc(&p.c, "send", 10 + i, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
			if (expect_wc(&p.s, "recv", 1000 + i, IBV_WC_SUCCESS, IBV_WC_RECV, lens[i],
				      &wc)) {
				check(!memcmp(p.s.buf + i * MSG, p.c.buf + 8192 + i * MSG, lens[i]),
				      "message %d differs", i);
				check(wc.qp_num == p.s.id->qp->qp_num, "recv qp_num %u", wc.qp_num);
				check(!(wc.wc_flags & IBV_WC_WITH_IMM), "recv with IMM flag");
			}
		}
		expect_no_wc(&p.c, "client", 100);
		expect_no_wc(&p.s, "server", 100);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_send_unsignaled(void)
{
	struct pair p;
	struct opts o = { .recvs = 4 };

	if (open_pair(&p, &o)) {
		for (int i = 0; i < 4; i++)
			check(!post_send(&p.c, 20 + i, 8192, 64, i == 3 ? IBV_SEND_SIGNALED : 0,
					 false), "post_send: %m");
		for (int i = 0; i < 4; i++)
			expect_wc(&p.s, "recv", 1000 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 64, NULL);
		/* Only the signalled one completes at the sender. */
		expect_wc(&p.c, "send", 23, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_no_wc(&p.c, "client", 200);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_send_inline(void)
{
	struct pair p;
	struct opts o = { .recvs = 2 };

	if (open_pair(&p, &o)) {
		fill(p.c.buf + 8192, 64, 7);
		memcpy(p.c.buf + 16384, p.c.buf + 8192, 64);
		int rc = post_send(&p.c, 30, 8192, 64, IBV_SEND_SIGNALED | IBV_SEND_INLINE, false);

		check(!rc, "post_send inline: %s", strerror(rc));
		/* Inline data is copied at post time: changing the buffer afterwards is harmless. */
		memset(p.c.buf + 8192, 0xee, 64);
		expect_wc(&p.c, "send", 30, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_wc(&p.s, "recv", 1000, IBV_WC_SUCCESS, IBV_WC_RECV, 64, NULL);
		check(!memcmp(p.s.buf, p.c.buf + 16384, 64), "inline data differs");
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_send_zero(void)
{
	struct pair p;
	struct opts o = { .recvs = 2 };

	if (open_pair(&p, &o)) {
		int rc = post_send(&p.c, 40, 0, 0, IBV_SEND_SIGNALED, true);

		check(!rc, "post_send without SGE: %s", strerror(rc));
		expect_wc(&p.c, "send", 40, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_wc(&p.s, "recv", 1000, IBV_WC_SUCCESS, IBV_WC_RECV, 0, NULL);
		/* A zero-byte SEND with a zero-length SGE as well. */
		rc = post_send(&p.c, 41, 8192, 0, IBV_SEND_SIGNALED, false);
		check(!rc, "post_send of 0 bytes: %s", strerror(rc));
		expect_wc(&p.c, "send", 41, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		expect_wc(&p.s, "recv", 1001, IBV_WC_SUCCESS, IBV_WC_RECV, 0, NULL);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_send_solicited(void)
{
	struct pair p;
	struct opts o = { .recvs = 4 };

	if (open_pair(&p, &o)) {
		struct ibv_wc wc[4];

		check(!ibv_req_notify_cq(p.s.cq, 1), "req_notify solicited: %m");
		check(!post_send(&p.c, 50, 8192, 32, IBV_SEND_SIGNALED, false), "post_send");
		expect_wc(&p.c, "unsolicited send", 50, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		check(count_cq_events(&p.s, 500, 0) == 0, "an unsolicited SEND raised a "
		      "solicited-only event");
		check(!post_send(&p.c, 51, 8192, 32, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
				 false), "post_send");
		expect_wc(&p.c, "solicited send", 51, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		int n = count_cq_events(&p.s, 2000, 1);

		check_x(n == 1, drv_srv, "siw signals receive completions as unsolicited: a "
			"solicited-only arm never fires for a SEND", "%d events for a solicited SEND "
			"on a solicited-only arm, want 1", n);
		n = poll_n(&p.s, wc, 2, 2000);
		check(n == 2, "%d receive completions, want 2", n);
		expect_no_wc(&p.s, "server", 200);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_cq_events_once(void)
{
	struct pair p;
	struct opts o = { .recvs = 8 };

	if (open_pair(&p, &o)) {
		struct ibv_wc wc[8];
		int n;

		/* Armed with nothing pending: no event. */
		check(!ibv_req_notify_cq(p.s.cq, 0), "req_notify: %m");
		n = count_cq_events(&p.s, 300, 0);
		check(n == 0, "%d events with nothing completed", n);
		/* Three completions on one arm: one event. */
		for (int i = 0; i < 3; i++)
			post_send(&p.c, 60 + i, 8192, 16, i == 2 ? IBV_SEND_SIGNALED : 0, false);
		expect_wc(&p.c, "send", 62, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		n = count_cq_events(&p.s, 1000, 1);
		check(n == 1, "%d events for 3 completions on one arm, want 1", n);
		check(poll_n(&p.s, wc, 3, 2000) == 3, "3 receive completions");
		/* Not re-armed: more completions, no event. */
		post_send(&p.c, 63, 8192, 16, IBV_SEND_SIGNALED, false);
		expect_wc(&p.c, "send", 63, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		check(poll_n(&p.s, wc, 1, 2000) == 1, "receive completion");
		n = count_cq_events(&p.s, 300, 0);
		check(n == 0, "%d events without an arm", n);
		/* Re-armed: one more event, then quiet. */
		check(!ibv_req_notify_cq(p.s.cq, 0), "req_notify: %m");
		post_send(&p.c, 64, 8192, 16, IBV_SEND_SIGNALED, false);
		expect_wc(&p.c, "send", 64, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		n = count_cq_events(&p.s, 1000, 1);
		check(n == 1, "%d events after re-arming, want 1", n);
		check(poll_n(&p.s, wc, 1, 2000) == 1, "receive completion");
		n = count_cq_events(&p.s, 300, 0);
		check(n == 0, "%d extra events", n);
		/* The send side's own CQ: armed, one signalled send, one event. */
		check(!ibv_req_notify_cq(p.c.cq, 0), "req_notify: %m");
		post_send(&p.c, 65, 8192, 16, IBV_SEND_SIGNALED, false);
		n = count_cq_events(&p.c, 1000, 1);
		check(n == 1, "%d send-side events, want 1", n);
		expect_wc(&p.c, "send", 65, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
		n = count_cq_events(&p.c, 300, 0);
		check(n == 0, "%d extra send-side events", n);
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_recv_srq(void)
{
	struct pair p;
	struct opts o = { .recvs = 6, .srq = true };

	if (open_pair(&p, &o)) {
		struct ibv_wc wc;

		for (int i = 0; i < 4; i++) {
			fill(p.c.buf + 8192 + i * MSG, 200, 20 + i);
			post_send(&p.c, 70 + i, 8192 + i * MSG, 200, IBV_SEND_SIGNALED, false);
		}
		for (int i = 0; i < 4; i++) {
			expect_wc(&p.c, "send", 70 + i, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
			if (expect_wc(&p.s, "srq recv", 1000 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 200,
				      &wc)) {
				check(wc.qp_num == p.s.id->qp->qp_num, "qp_num %u, want %u",
				      wc.qp_num, p.s.id->qp->qp_num);
				check(!memcmp(p.s.buf + i * MSG, p.c.buf + 8192 + i * MSG, 200),
				      "message %d differs", i);
			}
		}
		close_pair(&p);
		/* The SRQ's unused receives stay on the SRQ: no flush of SRQ receives. */
		expect_no_wc(&p.s, "server after disconnect", 300);
	}
	free_pair(&p);
}

/* The next async event of a context within ms (a quiet window if none is expected), or -1. */
static int async_event(struct ibv_context *ctx, int ms, bool expected, struct ibv_async_event *ev)
{
	struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };
	int wait_ms = expected ? ms * scale : (int)(quiet_secs(ms) * 1000);

	if (poll(&pf, 1, wait_ms) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	ibv_ack_async_event(ev);
	return 0;
}

static void t_srq_limit(void)
{
	struct pair p;
	struct opts o = { .recvs = 6, .srq = true };

	if (open_pair(&p, &o)) {
		struct ibv_context *ctx = p.s.id->verbs;
		struct ibv_srq_attr sa = { .srq_limit = 3 };
		struct ibv_async_event ev;

		check(!ibv_modify_srq(p.s.srq, &sa, IBV_SRQ_LIMIT), "arm the limit: %m");
		/* 6 receives, limit 3: 3 messages leave 3, a 4th leaves 2, below it; the
		 * event disarms the limit, so a 5th (1 left) raises none. (The user library
		 * has no query_srq to read the limit back.) */
		for (int i = 0; i < 5; i++) {
			post_send(&p.c, 70 + i, 8192, 64, IBV_SEND_SIGNALED, false);
			expect_wc(&p.c, "send", 70 + i, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
			expect_wc(&p.s, "srq recv", 1000 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 64, NULL);
			int got = async_event(ctx, i == 3 ? 5000 : 200, i == 3, &ev);

			if (i != 3)
				check(got, "event %s with %d receives left, limit %s",
				      ibv_event_type_str(ev.event_type), 5 - i,
				      i < 3 ? "3" : "disarmed");
			else if (check(!got, "no event with 2 receives left, limit 3"))
				check(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
				      ev.element.srq == p.s.srq, "event %s, want SRQ_LIMIT_REACHED",
				      ibv_event_type_str(ev.event_type));
		}
		close_pair(&p);
	}
	free_pair(&p);
}

static void t_flush(void)
{
	struct pair p;
	struct opts o = { .recvs = 4 };

	if (open_pair(&p, &o)) {
		struct ibv_wc wc[8];
		struct rdma_cm_event *ev;

		/* The client goes away; the server's posted receives flush. */
		check(!rdma_disconnect(p.c.id), "rdma_disconnect: %m");
		ev = expect_ev(ch_srv, RDMA_CM_EVENT_DISCONNECTED, 10000, "server");
		if (ev)
			rdma_ack_cm_event(ev);
		ev = expect_ev(ch_cli, RDMA_CM_EVENT_DISCONNECTED, 10000, "client");
		if (ev)
			rdma_ack_cm_event(ev);
		int n = poll_n(&p.s, wc, 4, 5000);

		check(n == 4, "%d flushed receives, want 4", n);
		for (int i = 0; i < n; i++)
			check(wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id == 1000u + i,
			      "receive %d: wr_id %llu status %s, want WR_FLUSH_ERR", i,
			      (unsigned long long)wc[i].wr_id, st(wc[i].status));
		/* Work posted afterwards flushes too, on either queue. */
		int rc = post_send(&p.s, 80, 8192, 16, IBV_SEND_SIGNALED, false);

		/* siw's doorbell only flushes kernel consumers' work in ERROR. */
		static const char *why = "work a user posts to a QP in ERROR is never flushed";

		if (check(!rc, "post_send after disconnect: %s", strerror(rc)))
			check_x(poll_n(&p.s, wc, 1, 1000) == 1 && wc[0].wr_id == 80 &&
				wc[0].status == IBV_WC_WR_FLUSH_ERR, drv_srv, why,
				"a SEND posted after the disconnect does not flush");
		rc = post_recv(&p.s, 81, 0, 16);
		if (check(!rc, "post_recv after disconnect: %s", strerror(rc)))
			check_x(poll_n(&p.s, wc, 1, 1000) == 1 && wc[0].wr_id == 81 &&
				wc[0].status == IBV_WC_WR_FLUSH_ERR, drv_srv, why,
				"a RECV posted after the disconnect does not flush");
		expect_no_wc(&p.s, "server", 200);
	}
	free_pair(&p);
}

static void t_recv_too_small(void)
{
	struct pair p;
	struct opts o = { .recvs = 0 };

	if (open_pair(&p, &o)) {
		struct rdma_cm_event *ev;

		post_recv(&p.s, 90, 0, 16);
		post_recv(&p.s, 91, MSG, 16);
		post_send(&p.c, 92, 8192, 100, IBV_SEND_SIGNALED, false);
		/* The receiver's buffer is too short: a local length error there; the
		 * connection is then torn down (RFC 5040 Terminate), the rest flushes. */
		expect_wc(&p.s, "too-short recv", 90, IBV_WC_LOC_LEN_ERR, 0, -1, NULL);
		expect_wc(&p.s, "next recv", 91, IBV_WC_WR_FLUSH_ERR, 0, -1, NULL);
		struct ibv_wc wc;

		if (check(poll_n(&p.c, &wc, 1, 5000) == 1, "sender: no completion"))
			diag("sender: status %s", st(wc.status));
		ev = get_event(ch_srv, 5000);
		if (check(ev, "server: no DISCONNECTED")) {
			check(ev->event == RDMA_CM_EVENT_DISCONNECTED, "server: %s",
			      ev_name(ev->event));
			rdma_ack_cm_event(ev);
		}
		ev = get_event(ch_cli, 5000);
		if (check(ev, "client: no DISCONNECTED")) {
			check(ev->event == RDMA_CM_EVENT_DISCONNECTED, "client: %s",
			      ev_name(ev->event));
			rdma_ack_cm_event(ev);
		}
	}
	free_pair(&p);
}

static void t_abortive(void)
{
	struct pair p;
	struct opts o = { .recvs = 2 };

	if (open_pair(&p, &o)) {
		struct ibv_wc wc[2];

		/* The client destroys its QP and id without disconnecting. */
		free_end(&p.c);
		struct rdma_cm_event *ev = expect_ev(ch_srv, RDMA_CM_EVENT_DISCONNECTED, 10000,
						     "server");
		if (ev)
			rdma_ack_cm_event(ev);
		int n = poll_n(&p.s, wc, 2, 5000);

		check(n == 2, "%d flushed receives, want 2", n);
	}
	free_pair(&p);
}

static void t_back_to_back(void)
{
	int n = 0, want = 100;
	double t0 = now();

	/* 100 connections one after the other, each listener torn down and rebuilt on the
	 * same port: nothing of the last one may stand in the way of the next. */
	for (int i = 0; i < want; i++) {
		struct pair p;
		struct opts o = { .recvs = 1 };
		int before = n_fail;

		port_next = 29000;
		if (open_pair(&p, &o)) {
			post_send(&p.c, i, 8192, 8, IBV_SEND_SIGNALED, false);
			expect_wc(&p.c, "send", i, IBV_WC_SUCCESS, IBV_WC_SEND, -1, NULL);
			expect_wc(&p.s, "recv", 1000, IBV_WC_SUCCESS, IBV_WC_RECV, 8, NULL);
			close_pair(&p);
		}
		free_pair(&p);
		if (n_fail != before) {
			diag("connection %d failed", i);
			break;
		}
		n++;
	}
	diag("%d of %d connections in %.1f s", n, want, now() - t0);
	port_next = 29001;
}

/* ---- RDMA Write and Read ---- */

static uint32_t rnd_state = 1;

/* xorshift32: as reproducible as srand/rand with a fixed seed, cheap enough for buffers */
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

static void rfill(char *p, int len)
{
	for (int i = 0; i < len; i++)
		p[i] = rnd() >> 24;
}

static int post_rdma(struct end *e, uint64_t wr_id, enum ibv_wr_opcode op, int off, int len,
		     uint64_t raddr, uint32_t rkey, int flags)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = flags, .wr.rdma = { raddr, rkey } }, *bad;

	return ibv_post_send(e->id->qp, &wr, &bad);
}

/* A signalled Write or Read of len bytes between e's buffer at off and peer's at roff. */
static int post_rw(struct end *e, uint64_t wr_id, enum ibv_wr_opcode op, int off, int len,
		   struct end *peer, int roff)
{
	return post_rdma(e, wr_id, op, off, len, (uintptr_t)peer->buf + roff, peer->mr->rkey,
			 IBV_SEND_SIGNALED);
}

/* The first offset where a and b differ after up to ms for them to agree, or -1: a Write
 * completes at its sender once sent, the peer may place it a little later. */
static int wait_same(const char *a, const char *b, int len, int ms)
{
	double end = now() + ms * scale / 1000.0;

	while (memcmp(a, b, len)) {
		if (now() > end) {
			for (int i = 0; i < len; i++)
				if (a[i] != b[i])
					return i;
		}
		usleep(1000);
	}
	return -1;
}

struct want {
	uint64_t wr_id;
	int opcode;	/* IBV_WC_RECV: a receive queue completion */
	int byte_len;	/* < 0: any */
};

/* n successful completions within 10 s (scaled): the send queue's in the order of w (any
 * order with any_order), the receive queue's in theirs; the two queues share the CQ and may
 * interleave. Quiet unless a check fails; stops at the first wrong completion, which is an
 * xfail as in check_x. */
static bool expect_wcs_x(struct end *e, const char *what, const struct want *w, int n,
			 bool any_order, const char *drv, const char *why)
{
	struct ibv_wc wc[64];
	uint64_t used = 0;
	int got = poll_n(e, wc, n, 10000);

	if (!check(got == n, "%s: %d of %d completions", what, got, n))
		return false;
	for (int i = 0; i < n; i++) {
		int s = 0, r = 0, j = -1;

		/* the next of each queue not taken yet */
		while (s < n && (w[s].opcode == IBV_WC_RECV || used >> s & 1))
			s++;
		while (r < n && (w[r].opcode != IBV_WC_RECV || used >> r & 1))
			r++;
		for (int k = 0; k < n && j < 0; k++)
			if (!(used >> k & 1) && w[k].wr_id == wc[i].wr_id &&
			    (any_order || k == s || k == r))
				j = k;
		const struct want *x = &w[j >= 0 ? j : s < n ? s : r];

		if (!check_x(j >= 0 && wc[i].status == IBV_WC_SUCCESS &&
			     (int)wc[i].opcode == x->opcode &&
			     (x->byte_len < 0 || (int)wc[i].byte_len == x->byte_len), drv, why,
			     "%s: completion %d: wr_id %llu status %s opcode %d byte_len %u, want "
			     "wr_id %llu opcode %d byte_len %d", what, i,
			     (unsigned long long)wc[i].wr_id, st(wc[i].status), wc[i].opcode,
			     wc[i].byte_len, (unsigned long long)x->wr_id, x->opcode, x->byte_len))
			return false;
		used |= 1ull << j;
	}
	return true;
}

#define expect_wcs(e, what, w, n) expect_wcs_x((e), (what), (w), (n), false, NULL, NULL)

/* The offsets and sizes of op i: 0 and 1 byte, the whole buffer, then random ones, mostly
 * up to 4 KiB (a 64 KiB transfer takes tens of ms under TCG). */
static void rand_op(int i, int *loff, int *roff, int *len)
{
	*loff = rnd() % BUF_SIZE;
	*roff = rnd() % BUF_SIZE;
	int max = BUF_SIZE - (*loff > *roff ? *loff : *roff);

	if (i % 8 && max > 4096)
		max = 4096;
	*len = i == 0 ? 0 : i == 1 ? 1 : (int)(rnd() % (max + 1));
	if (i == 2) {
		*loff = *roff = 0;
		*len = BUF_SIZE;
	}
}

#define RW_OPS 100

static void t_write_integrity(void)
{
	struct pair p;
	struct opts o = { .recvs = 0 };
	char *mirror = malloc(BUF_SIZE); /* what the server's buffer must hold */

	port_next = 30000;
	rnd_state = 0x5eed0001;
	if (open_pair(&p, &o)) {
		rfill(p.s.buf, BUF_SIZE);
		memcpy(mirror, p.s.buf, BUF_SIZE);
		for (int i = 0; i < RW_OPS; i++) {
			struct want w = { i, IBV_WC_RDMA_WRITE, -1 };
			int loff, roff, len;

			rand_op(i, &loff, &roff, &len);
			rfill(p.c.buf + loff, len);
			memcpy(mirror + roff, p.c.buf + loff, len);
			if (!check(!post_rw(&p.c, i, IBV_WR_RDMA_WRITE, loff, len, &p.s, roff),
				   "post Write: %m") || !expect_wcs(&p.c, "write", &w, 1))
				break;
			/* The whole buffer: nothing outside the target changes either. */
			int d = wait_same(p.s.buf, mirror, BUF_SIZE, 2000);

			if (!check(d < 0, "Write %d of %d bytes from %d to %d: byte %d %s differs",
				   i, len, loff, roff, d, d >= roff && d < roff + len ? "inside" :
				   "outside the target"))
				break;
		}
		expect_no_wc(&p.s, "server", 100);
		close_pair(&p);
	}
	free_pair(&p);
	free(mirror);
}

static void t_read_integrity(void)
{
	struct pair p;
	/* the client's ORD and the server's IRD 8: eight Reads may be outstanding */
	struct opts o = { .recvs = 0, .cli_id = 8, .srv_rr = 8 };
	char *mirror = malloc(BUF_SIZE); /* what the client's buffer must hold */

	port_next = 30010;
	rnd_state = 0x5eed0002;
	if (open_pair(&p, &o)) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		ibv_query_qp(p.c.id->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC, &ia);
		diag("client ORD %d", a.max_rd_atomic);
		rfill(p.c.buf, BUF_SIZE);
		memcpy(mirror, p.c.buf, BUF_SIZE);
		for (int i = 0; i < RW_OPS; i++) {
			int loff, roff, len;

			rand_op(i, &loff, &roff, &len);
			struct want w = { i, IBV_WC_RDMA_READ, len };

			rfill(p.s.buf + roff, len);
			memcpy(mirror + loff, p.s.buf + roff, len);
			if (!check(!post_rw(&p.c, i, IBV_WR_RDMA_READ, loff, len, &p.s, roff),
				   "post Read: %m") || !expect_wcs(&p.c, "read", &w, 1))
				break;
			int d = wait_same(p.c.buf, mirror, BUF_SIZE, 0);

			if (!check(d < 0, "Read %d of %d bytes from %d to %d: byte %d %s differs",
				   i, len, roff, loff, d, d >= loff && d < loff + len ? "inside" :
				   "outside the target"))
				break;
		}
		/* Eight at once, each to an 8 KiB region of its own: in order, all placed. */
		for (int r = 0; r < 5 && !n_fail; r++) {
			struct want w[8];

			for (int k = 0; k < 8; k++) {
				int loff = k * 8192 + rnd() % 1024, roff = k * 8192 + rnd() % 1024;
				int len = 1 + rnd() % 7168;

				w[k] = (struct want){ 1000 + r * 8 + k, IBV_WC_RDMA_READ, len };
				rfill(p.s.buf + roff, len);
				memcpy(mirror + loff, p.s.buf + roff, len);
				check(!post_rw(&p.c, w[k].wr_id, IBV_WR_RDMA_READ, loff, len, &p.s,
					       roff), "post Read %d of 8: %m", k);
			}
			if (!expect_wcs(&p.c, "8 reads", w, 8))
				break;
			int d = wait_same(p.c.buf, mirror, BUF_SIZE, 0);

			check(d < 0, "round %d of 8 Reads: byte %d differs", r, d);
		}
		expect_no_wc(&p.s, "server", 100);
		close_pair(&p);
	}
	free_pair(&p);
	free(mirror);
}

static void t_send_integrity(void)
{
	enum { B = 8 }; /* SENDs in flight at once */
	struct pair p;
	struct opts o = { .recvs = SLOTS };

	port_next = 30020;
	rnd_state = 0x5eed0003;
	if (open_pair(&p, &o)) {
		memset(p.s.buf, 0xa5, SLOTS * MSG);
		for (int i = 0; i < RW_OPS && !n_fail; i += B) {
			struct want wc[B], wr[B];
			int off[B], len[B];

			for (int k = 0; k < B; k++) {
				int n = i + k;

				off[k] = 8192 + k * 512 + rnd() % 64;
				len[k] = n == 0 ? 0 : n == 1 ? 1 : n == 2 ? MSG : rnd() % (MSG + 1);
				rfill(p.c.buf + off[k], len[k]);
				wc[k] = (struct want){ n, IBV_WC_SEND, -1 };
				wr[k] = (struct want){ 1000 + n, IBV_WC_RECV, len[k] };
				check(!post_send(&p.c, n, off[k], len[k], IBV_SEND_SIGNALED, false),
				      "post_send: %m");
			}
			if (!expect_wcs(&p.c, "sends", wc, B) || !expect_wcs(&p.s, "recvs", wr, B))
				break;
			for (int k = 0; k < B; k++) {
				int n = i + k, slot = n % SLOTS * MSG, j = len[k];

				check(!memcmp(p.s.buf + slot, p.c.buf + off[k], len[k]),
				      "SEND %d of %d bytes differs", n, len[k]);
				while (j < MSG && p.s.buf[slot + j] == (char)0xa5)
					j++;
				check(j == MSG, "SEND %d of %d bytes: byte %d of the slot written",
				      n, len[k], j);
				memset(p.s.buf + slot, 0xa5, MSG);
				check(!post_recv(&p.s, 1000 + n + SLOTS, slot, MSG),
				      "post_recv: %m");
			}
		}
		close_pair(&p);
	}
	free_pair(&p);
}

#define ORDER_XFAIL "siw completes a SEND ahead of a Read posted before it"

static void t_mixed_order(void)
{
	struct pair p;
	struct opts o = { .recvs = 4, .cli_id = 8, .srv_rr = 8 };

	port_next = 30030;
	rnd_state = 0x5eed0004;
	if (open_pair(&p, &o)) {
		struct end *c = &p.c, *s = &p.s;

		/* Many rounds: how the sender meets the next message (still in the ring, or
		 * posted after it went idle) varies from round to round. */
		for (int r = 0; r < 32 && !n_fail; r++) {
			/* The first Read is long: the SEND behind it is sent well before the
			 * response is in, yet completes after the Read. */
			const struct want w[] = {
				{ r * 10 + 1, IBV_WC_RDMA_READ, 32768 },
				{ r * 10 + 2, IBV_WC_SEND, -1 },
				{ r * 10 + 3, IBV_WC_RDMA_WRITE, -1 },
				{ r * 10 + 4, IBV_WC_RDMA_READ, 4096 },
				{ r * 10 + 5, IBV_WC_SEND, -1 },
			};
			const struct want wr[] = {
				{ 1000 + 2 * r, IBV_WC_RECV, 100 },
				{ 1001 + 2 * r, IBV_WC_RECV, MSG },
			};

			rfill(p.s.buf + 32768, 32768);
			rfill(p.s.buf + 16384, 4096);
			rfill(p.c.buf + 4096, 2 * MSG);
			rfill(p.c.buf + 8192, 8192);
			check(!post_rw(c, w[0].wr_id, IBV_WR_RDMA_READ, 32768, 32768, s, 32768) &&
			      !post_send(c, w[1].wr_id, 4096, 100, IBV_SEND_SIGNALED, false) &&
			      !post_rw(c, w[2].wr_id, IBV_WR_RDMA_WRITE, 8192, 8192, s, 8192) &&
			      !post_rw(c, w[3].wr_id, IBV_WR_RDMA_READ, 16384, 4096, s, 16384) &&
			      !post_send(c, w[4].wr_id, 4096 + MSG, MSG, IBV_SEND_SIGNALED, false),
			      "post: %m");
			expect_wcs_x(&p.c, "client", w, 5, false, drv_cli, ORDER_XFAIL);
			if (!expect_wcs(&p.s, "server", wr, 2))
				break;
			check(!memcmp(p.c.buf + 32768, p.s.buf + 32768, 32768), "Read 1 differs");
			check(!memcmp(p.c.buf + 16384, p.s.buf + 16384, 4096), "Read 2 differs");
			/* the Read behind the Write answered: the Write is placed */
			check(!memcmp(p.s.buf + 8192, p.c.buf + 8192, 8192), "Write differs");
			check(!memcmp(p.s.buf + 2 * r % SLOTS * MSG, p.c.buf + 4096, 100),
			      "SEND 1 differs");
			check(!memcmp(p.s.buf + (2 * r + 1) % SLOTS * MSG, p.c.buf + 4096 + MSG,
				      MSG), "SEND 2 differs");
			check(!post_recv(&p.s, 1004 + 2 * r, (2 * r + 4) % SLOTS * MSG, MSG) &&
			      !post_recv(&p.s, 1005 + 2 * r, (2 * r + 5) % SLOTS * MSG, MSG),
			      "post_recv: %m");
		}
		close_pair(&p);
	}
	free_pair(&p);
}

#define QPS_XFAIL "siw hands out the ring mmap key 0x90000, which its library takes for " \
		  "SIW_INVAL_UOBJ_KEY: some 36 QPs with their CQs per process and device"

static void t_qps_64(void)
{
	enum { N = 64, LEN = 3000, SLEN = 200, CLI = 1, SRV = 2, REJ = 4 };
	struct pair *p = calloc(N, sizeof(*p));
	int idx[N], state[N], err, port = 30040, n_conn = 0, done = 0, up = 0, disc = 0;
	struct rdma_cm_id *l = listen_on(SRV4, port, N, &err);
	bool srv_broken = false, order_xfail = false;
	struct rdma_cm_event *ev;
	double end;

	memset(state, 0, sizeof(state));
	if (!check(l, "listen backlog %d: %s", N, strerror(err)))
		goto out;
	/* All requests at once; each carries its index, to pair the server's id with it. */
	for (int i = 0; i < N; i++) {
		struct rdma_cm_id *id = resolve(SRV4, port);
		struct rdma_conn_param cp;

		idx[i] = i;
		if (!id)
			goto close;
		if (!check_x(!setup_end(&p[i].c, id, false, 1), drv_cli, QPS_XFAIL,
			     "client QP %d of %d", i + 1, N)) {
			free_end(&p[i].c);
			break;
		}
		conn_param(&cp, &idx[i], sizeof(int), 1, 1);
		if (!check(!rdma_connect(id, &cp), "rdma_connect: %m"))
			goto close;
		n_conn++;
	}
	end = now() + 60.0 * scale;
	/* done: up, or refused after the server failed */
	for (; done < n_conn && now() < end && !n_fail; usleep(1000)) {
		while ((ev = get_event(ch_srv, 0))) {
			struct rdma_cm_id *id = ev->id;
			int i = -1;

			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				struct rdma_conn_param cp;

				if (ev->param.conn.private_data_len >= sizeof(int))
					memcpy(&i, ev->param.conn.private_data, sizeof(int));
				rdma_ack_cm_event(ev);
				if (!check(i >= 0 && i < n_conn && !p[i].s.id,
					   "request of index %d", i)) {
					rdma_reject(id, NULL, 0);
					rdma_destroy_id(id);
					continue;
				}
				conn_param(&cp, NULL, 0, 1, 1);
				if (!srv_broken &&
				    check_x(!setup_end(&p[i].s, id, false, 1), drv_srv, QPS_XFAIL,
					    "server QP %d of %d", i + 1, N)) {
					check(!rdma_accept(id, &cp), "rdma_accept: %m");
					continue;
				}
				/* past the first failure, the rest are refused untried */
				srv_broken = true;
				rdma_reject(id, NULL, 0);
				if (p[i].s.id)
					free_end(&p[i].s);
				else
					rdma_destroy_id(id);
				state[i] |= REJ;
				continue;
			}
			while (++i < n_conn && p[i].s.id != id)
				;
			if (ev->event == RDMA_CM_EVENT_ESTABLISHED && i < n_conn) {
				state[i] |= SRV;
				done += state[i] == (CLI | SRV);
			} else {
				check(0, "server: %s status %d", ev_name(ev->event), ev->status);
			}
			rdma_ack_cm_event(ev);
		}
		while ((ev = get_event(ch_cli, 0))) {
			int i = -1;

			while (++i < n_conn && p[i].c.id != ev->id)
				;
			if (ev->event == RDMA_CM_EVENT_ESTABLISHED && i < n_conn) {
				state[i] |= CLI;
				done += state[i] == (CLI | SRV);
			} else if (ev->event == RDMA_CM_EVENT_REJECTED && i < n_conn &&
				   state[i] & REJ) {
				done++;
			} else {
				check(0, "client: %s status %d", ev_name(ev->event), ev->status);
			}
			rdma_ack_cm_event(ev);
		}
	}
	for (int i = 0; i < n_conn; i++)
		up += state[i] == (CLI | SRV);
	diag("%d requests, %d connections up", n_conn, up);
	if (!check(done == n_conn, "%d of %d connections established or refused", done,
		   n_conn))
		goto close;
	/* Work on all first, then every completion: the pairs' traffic interleaves. Each pair:
	 * the client Writes, Reads that back and SENDs; the server SENDs and Reads. */
	rnd_state = 0x5eed0005;
	for (int i = 0; i < n_conn; i++) {
		struct end *c = &p[i].c, *s = &p[i].s;

		if (state[i] != (CLI | SRV))
			continue;
		rfill(c->buf + 8192, LEN);
		rfill(c->buf + 24576, SLEN);
		rfill(s->buf + 24576, SLEN);
		check(!post_rw(c, 1, IBV_WR_RDMA_WRITE, 8192, LEN, s, 8192) &&
		      !post_rw(c, 2, IBV_WR_RDMA_READ, 16384, LEN, s, 8192) &&
		      !post_send(c, 3, 24576, SLEN, IBV_SEND_SIGNALED, false) &&
		      !post_send(s, 4, 24576, SLEN, IBV_SEND_SIGNALED, false) &&
		      !post_rw(s, 5, IBV_WR_RDMA_READ, 40960, LEN, c, 8192),
		      "pair %d: post: %m", i);
	}
	for (int i = 0; i < n_conn && !n_fail; i++) {
		if (state[i] != (CLI | SRV))
			continue;
		const struct want wc[] = {
			{ 1, IBV_WC_RDMA_WRITE, -1 },
			{ 2, IBV_WC_RDMA_READ, LEN },
			{ 3, IBV_WC_SEND, -1 },
			{ 1000, IBV_WC_RECV, SLEN },
		};
		const struct want ws[] = {
			{ 4, IBV_WC_SEND, -1 },
			{ 5, IBV_WC_RDMA_READ, LEN },
			{ 1000, IBV_WC_RECV, SLEN },
		};
		struct end *c = &p[i].c, *s = &p[i].s;
		int xfails = n_xfail;
		char what[32];

		snprintf(what, sizeof(what), "pair %d client", i);
		/* after one xfail for the order, the other pairs' is not checked again */
		if (!expect_wcs_x(c, what, wc, 4, order_xfail, drv_cli, ORDER_XFAIL) &&
		    n_xfail > xfails)
			order_xfail = true;
		snprintf(what, sizeof(what), "pair %d server", i);
		expect_wcs(s, what, ws, 3);
		/* The Read behind the Write answered: the Write is placed. */
		check(!memcmp(s->buf + 8192, c->buf + 8192, LEN), "pair %d: Write differs", i);
		check(!memcmp(c->buf + 16384, c->buf + 8192, LEN), "pair %d: Read differs", i);
		check(!memcmp(s->buf + 40960, c->buf + 8192, LEN), "pair %d: server's Read differs",
		      i);
		check(!memcmp(s->buf, c->buf + 24576, SLEN), "pair %d: client's SEND differs", i);
		check(!memcmp(c->buf, s->buf + 24576, SLEN), "pair %d: server's SEND differs", i);
	}
	for (int i = 0; i < n_conn; i++)
		if (state[i] == (CLI | SRV))
			check(!rdma_disconnect(p[i].c.id), "pair %d: rdma_disconnect: %m", i);
	end = now() + 30.0 * scale;
	while (disc < 2 * up && now() < end) {
		for (int side = 0; side < 2; side++) {
			while ((ev = get_event(side ? ch_srv : ch_cli, 0))) {
				if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
					disc++;
				else
					check(0, "%s: %s status %d", side ? "server" : "client",
					      ev_name(ev->event), ev->status);
				rdma_ack_cm_event(ev);
			}
		}
		usleep(1000);
	}
	check(disc == 2 * up, "%d of %d DISCONNECTED events", disc, 2 * up);
close:
	for (int i = 0; i < N; i++) {
		free_end(&p[i].c);
		free_end(&p[i].s);
	}
	/* requests not taken after a failure: their ids are ours to destroy */
	while ((ev = get_event(ch_srv, 0))) {
		struct rdma_cm_id *id = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;

		rdma_ack_cm_event(ev);
		if (id)
			rdma_destroy_id(id);
	}
	rdma_destroy_id(l);
	free_pair(&(struct pair){ 0 });
out:
	free(p);
}

/* ---- one QP, one CQ, threads posting and polling ---- */

enum { MT_POSTERS = 4, MT_POLLERS = 2, MT_WRITES = 200, MT_LEN = 80, MT_REGION = 16384 };

struct mt_thread {
	pthread_t thread;
	struct pair *p;
	int t, err;
	struct ibv_wc bad; /* the first wrong completion */
	int n_bad;
};

static int mt_credits, mt_posted, mt_polled, mt_posters_left;
static int mt_seen[MT_POSTERS * MT_WRITES];
static double mt_end;

static void *mt_poster(void *arg)
{
	struct mt_thread *m = arg;

	for (int j = 0; j < MT_WRITES && !m->err; j++) {
		int off = m->t * MT_REGION + j * MT_LEN, rc;

		/* A credit per send queue slot: no post overflows it, and the CQ (128) takes
		 * every completion. */
		while (__atomic_sub_fetch(&mt_credits, 1, __ATOMIC_SEQ_CST) < 0) {
			__atomic_add_fetch(&mt_credits, 1, __ATOMIC_SEQ_CST);
			if (now() > mt_end) {
				m->err = ETIMEDOUT;
				break;
			}
			usleep(100);
		}
		if (m->err)
			break;
		/* A slot's completion may be polled just before the slot is free again. (The
		 * soft-iWARP library returns -ENOMEM.) */
		while (((rc = post_rw(&m->p->c, m->t * MT_WRITES + j, IBV_WR_RDMA_WRITE, off,
				      MT_LEN, &m->p->s, off)) == ENOMEM || rc == -ENOMEM) &&
		       now() < mt_end)
			usleep(100);
		if (rc)
			m->err = rc;
		else
			__atomic_add_fetch(&mt_posted, 1, __ATOMIC_SEQ_CST);
	}
	__atomic_sub_fetch(&mt_posters_left, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *mt_poller(void *arg)
{
	struct mt_thread *m = arg;
	struct ibv_wc wc[8];

	for (;;) {
		int n = ibv_poll_cq(m->p->c.cq, 8, wc);

		if (n < 0) {
			m->err = EIO;
			break;
		}
		for (int i = 0; i < n; i++) {
			uint64_t k = wc[i].wr_id;

			if (k < MT_POSTERS * MT_WRITES)
				__atomic_add_fetch(&mt_seen[k], 1, __ATOMIC_SEQ_CST);
			if (k >= MT_POSTERS * MT_WRITES || wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].opcode != IBV_WC_RDMA_WRITE) {
				if (!m->n_bad++)
					m->bad = wc[i];
			}
			__atomic_add_fetch(&mt_polled, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&mt_credits, 1, __ATOMIC_SEQ_CST);
		}
		if (n)
			continue;
		if ((!__atomic_load_n(&mt_posters_left, __ATOMIC_SEQ_CST) &&
		     __atomic_load_n(&mt_polled, __ATOMIC_SEQ_CST) >=
		     __atomic_load_n(&mt_posted, __ATOMIC_SEQ_CST)) || now() > mt_end)
			break;
		usleep(200);
	}
	return NULL;
}

static void t_mt_post_poll(void)
{
	struct mt_thread m[MT_POSTERS + MT_POLLERS];
	struct pair p;
	struct opts o = { .recvs = 0 };
	char *mirror = malloc(BUF_SIZE);

	port_next = 30050;
	rnd_state = 0x5eed0006;
	if (open_pair(&p, &o)) {
		rfill(p.c.buf, BUF_SIZE);
		rfill(p.s.buf, BUF_SIZE);
		memcpy(mirror, p.s.buf, BUF_SIZE);
		for (int t = 0; t < MT_POSTERS; t++)
			memcpy(mirror + t * MT_REGION, p.c.buf + t * MT_REGION, MT_WRITES * MT_LEN);
		memset(mt_seen, 0, sizeof(mt_seen));
		memset(m, 0, sizeof(m));
		mt_credits = 24; /* of the 32 the send queue holds */
		mt_posted = mt_polled = 0;
		mt_posters_left = MT_POSTERS;
		mt_end = now() + 60.0 * scale;
		double t0 = now();

		for (int t = 0; t < MT_POSTERS + MT_POLLERS; t++) {
			m[t].p = &p;
			m[t].t = t;
			if (pthread_create(&m[t].thread, NULL,
					   t < MT_POSTERS ? mt_poster : mt_poller, &m[t])) {
				/* the pollers must not wait for a poster that never ran */
				check(0, "pthread_create: %m");
				if (t < MT_POSTERS)
					__atomic_sub_fetch(&mt_posters_left, 1, __ATOMIC_SEQ_CST);
				m[t].p = NULL;
			}
		}
		for (int t = 0; t < MT_POSTERS + MT_POLLERS; t++)
			if (m[t].p)
				pthread_join(m[t].thread, NULL);
		diag("%d Writes posted, %d completions polled in %.1f s", mt_posted, mt_polled,
		     now() - t0);
		for (int t = 0; t < MT_POSTERS + MT_POLLERS; t++) {
			check(!m[t].err, "thread %d (%s): %s", t, t < MT_POSTERS ? "posting" :
			      "polling", strerror(abs(m[t].err)));
			check(!m[t].n_bad, "thread %d: %d wrong completions, the first wr_id %llu "
			      "status %s opcode %d", t, m[t].n_bad,
			      (unsigned long long)m[t].bad.wr_id, st(m[t].bad.status),
			      m[t].bad.opcode);
		}
		int missing = 0, twice = 0;

		for (int k = 0; k < MT_POSTERS * MT_WRITES; k++) {
			missing += !mt_seen[k];
			twice += mt_seen[k] > 1;
		}
		check(!missing && !twice, "of %d wr_ids, %d not seen, %d seen more than once",
		      MT_POSTERS * MT_WRITES, missing, twice);
		int d = wait_same(p.s.buf, mirror, BUF_SIZE, 2000);

		check(d < 0, "byte %d (region %d, Write %d) differs", d, d / MT_REGION,
		      d % MT_REGION / MT_LEN);
		close_pair(&p);
	}
	free_pair(&p);
	free(mirror);
}

/* ---- a connection broken by its peer, another one unharmed ---- */

/* b still works: a Write and a SEND behind it, both arrived intact. */
static void still_serves(struct pair *b, int round)
{
	const struct want wc[] = {
		{ 10 + round, IBV_WC_RDMA_WRITE, -1 },
		{ 20 + round, IBV_WC_SEND, -1 },
	};
	const struct want wr = { 1000 + round, IBV_WC_RECV, 100 };

	rfill(b->c.buf + 8192, 1000);
	rfill(b->c.buf + 12288, 100);
	check(!post_rw(&b->c, wc[0].wr_id, IBV_WR_RDMA_WRITE, 8192, 1000, &b->s, 8192) &&
	      !post_send(&b->c, wc[1].wr_id, 12288, 100, IBV_SEND_SIGNALED, false),
	      "the other connection: post: %m");
	if (!expect_wcs(&b->c, "the other client", wc, 2) ||
	    !expect_wcs(&b->s, "the other server", &wr, 1))
		return;
	/* the SEND received: the Write before it is placed */
	check(!memcmp(b->s.buf + 8192, b->c.buf + 8192, 1000),
	      "the other connection: Write differs");
	check(!memcmp(b->s.buf + round % SLOTS * MSG, b->c.buf + 12288, 100),
	      "the other connection: SEND differs");
}

/* A connection of its own where the client Writes len bytes to the server's buffer at roff
 * with its rkey ^ rkey_xor: the server must refuse (Terminate), place nothing, and both
 * ends go; b, connected before, must not notice and serves on. */
static void broken_write(struct pair *b, int round, uint32_t rkey_xor, int roff, int len)
{
	struct pair a;
	struct opts o = { .recvs = 2 };
	char *before = malloc(BUF_SIZE);

	if (open_pair(&a, &o)) {
		struct ibv_wc wc[2];
		bool cli = false, srv = false;
		double end = now() + 10.0 * scale;

		rfill(a.s.buf, BUF_SIZE);
		memcpy(before, a.s.buf, BUF_SIZE);
		rfill(a.c.buf + 8192, len);
		struct ibv_sge sr = { (uintptr_t)a.c.buf + 16384, 64, a.c.mr->lkey };
		struct ibv_sge sw = { (uintptr_t)a.c.buf + 8192, len, a.c.mr->lkey };
		struct ibv_send_wr rd = { .wr_id = 2, .sg_list = &sr, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { (uintptr_t)a.s.buf, a.s.mr->rkey } };
		struct ibv_send_wr wr = { .wr_id = 1, .next = &rd, .sg_list = &sw, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { (uintptr_t)a.s.buf + roff,
						       a.s.mr->rkey ^ rkey_xor } }, *bad;

		/* A Write completes once sent, maybe before the peer refuses it; the Read behind
		 * it waits for a response the peer, gone at the Write, never sends. One post: the
		 * Read must be queued before the Write can end the connection (siw never flushes
		 * what a user posts to a QP in ERROR). */
		check(!ibv_post_send(a.c.id->qp, &wr, &bad), "post: %m");
		int n = 0;

		/* The client's own receives flush too, in between. */
		while (n < 2 && poll_n(&a.c, &wc[n], 1, 10000) == 1) {
			diag("client: wr_id %llu status %s", (unsigned long long)wc[n].wr_id,
			     st(wc[n].status));
			if (wc[n].wr_id < 1000)
				n++;
		}
		if (check(n == 2, "client: %d of 2 completions", n))
			check(wc[0].wr_id == 1 && wc[1].wr_id == 2 &&
			      wc[1].status != IBV_WC_SUCCESS, "the Read behind the refused Write "
			      "must fail");
		while ((!cli || !srv) && now() < end) {
			for (int side = 0; side < 2; side++) {
				struct rdma_cm_event *ev = get_event(side ? ch_srv : ch_cli, 10);

				if (!ev)
					continue;
				diag("%s: %s status %d", side ? "server" : "client",
				     ev_name(ev->event), ev->status);
				bool disc = ev->event == RDMA_CM_EVENT_DISCONNECTED;

				if (disc && ev->id == a.c.id)
					cli = true;
				else if (disc && ev->id == a.s.id)
					srv = true;
				else
					check(0, "%s: unexpected %s%s", side ? "server" : "client",
					      ev_name(ev->event),
					      ev->id == b->c.id || ev->id == b->s.id ?
					      " on the other connection" : "");
				rdma_ack_cm_event(ev);
			}
		}
		check(cli, "client: no DISCONNECTED");
		if (!srv) {
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr ia;

			ibv_query_qp(a.s.id->qp, &qa, IBV_QP_STATE, &ia);
			check(qa.qp_state == IBV_QPS_ERR, "server: no DISCONNECTED, QP state %d",
			      qa.qp_state);
		}
		n = poll_n(&a.s, wc, 2, 5000);
		check(n == 2 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		      wc[1].status == IBV_WC_WR_FLUSH_ERR, "server: %d of 2 receives flushed", n);
		check(!memcmp(a.s.buf, before, BUF_SIZE), "the refused Write placed data");
	}
	free_end(&a.c);
	free_end(&a.s);
	if (a.listener)
		rdma_destroy_id(a.listener);
	free(before);
	expect_quiet(ch_srv, 0, "server");
	expect_quiet(ch_cli, 0, "client");
	still_serves(b, round);
}

static void t_bad_stag(void)
{
	struct pair b;
	struct opts o = { .recvs = 4 };

	port_next = 30060;
	rnd_state = 0x5eed0007;
	if (open_pair(&b, &o)) {
		still_serves(&b, 0);
		diag("- another STag index");
		broken_write(&b, 1, 0xff00, 0, 4096);
		diag("- the STag's key changed");
		broken_write(&b, 2, 0xff, 0, 4096);
		close_pair(&b);
	}
	free_pair(&b);
}

static void t_write_out_of_bounds(void)
{
	struct pair b;
	struct opts o = { .recvs = 4 };

	port_next = 30070;
	rnd_state = 0x5eed0008;
	if (open_pair(&b, &o)) {
		still_serves(&b, 0);
		broken_write(&b, 1, 0, BUF_SIZE - 100, 4096);
		close_pair(&b);
	}
	free_pair(&b);
}

/*
 * As a bandwidth benchmark posts: one thread, 64-byte Writes, every STREAM_SIGNAL-th one
 * signalled, as many outstanding as the send queue holds (32). Each post must succeed at
 * once: once a completion is polled, the work before it has left the whole queue free.
 */
#define STREAM_WRITES 16384
#define STREAM_SIGNAL 16
#define STREAM_LEN 64

static void t_stream_unsignaled(void)
{
	struct pair p;
	struct opts o = { .recvs = 0 };

	port_next = 30080;
	rnd_state = 0x5eed0009;
	if (open_pair(&p, &o)) {
		int posted = 0, done = 0, rc = 0;
		double end = now() + 15.0 * scale, t0 = now();

		rfill(p.c.buf, BUF_SIZE);
		while (done < STREAM_WRITES && now() < end) {
			while (posted < STREAM_WRITES && posted - done < 32) {
				int off = posted * STREAM_LEN % BUF_SIZE;
				bool signal = (posted + 1) % STREAM_SIGNAL == 0;

				rc = post_rdma(&p.c, posted, IBV_WR_RDMA_WRITE, off, STREAM_LEN,
					       (uintptr_t)p.s.buf + off, p.s.mr->rkey,
					       signal ? IBV_SEND_SIGNALED : 0);
				if (rc)
					break;
				posted++;
			}
			if (!check(!rc, "post of Write %d with %d outstanding: %s", posted,
				   posted - done, strerror(abs(rc))))
				break;
			struct ibv_wc wc;
			int n = ibv_poll_cq(p.c.cq, 1, &wc);

			if (n < 0 || (n == 1 && !check(wc.status == IBV_WC_SUCCESS &&
						       wc.wr_id == (uint64_t)done + STREAM_SIGNAL - 1,
						       "completion wr_id %llu status %s, want %d",
						       (unsigned long long)wc.wr_id, st(wc.status),
						       done + STREAM_SIGNAL - 1)))
				break;
			done += n * STREAM_SIGNAL;
		}
		diag("%d Writes posted, %d completed in %.1f s", posted, done, now() - t0);
		check(done == STREAM_WRITES, "%d of %d Writes completed", done, STREAM_WRITES);
		int d = wait_same(p.s.buf, p.c.buf, BUF_SIZE, 2000);

		check(d < 0, "byte %d differs", d);
		expect_no_wc(&p.c, "client", 100);
		close_pair(&p);
	}
	free_pair(&p);
}

struct subtest {
	const char *name, *desc;
	void (*fn)(void);
};

static const struct subtest tests[] = {
	{ "listen_v4_wildcard", "listen on 0.0.0.0, connect, a message each way, disconnect",
	  t_listen_v4_wildcard },
	{ "listen_v4_specific", "listen on 192.0.2.2, connect, a message each way, disconnect",
	  t_listen_v4_specific },
	{ "listen_v6_wildcard", "listen on ::, connect over IPv6, disconnect",
	  t_listen_v6_wildcard },
	{ "listen_v6_specific", "listen on 2001:db8::2, connect over IPv6, disconnect",
	  t_listen_v6_specific },
	{ "listen_destroy", "destroy_listen closes the port; the port listens again at once",
	  t_listen_destroy },
	{ "backlog", "4 simultaneous requests, taken 1 s late, within a backlog of 4 all connect",
	  t_backlog },
	{ "refused", "connect to a port without listener: ECONNREFUSED", t_refused },
	{ "timeout", "a peer that never answers the MPA request: UNREACHABLE, -ETIMEDOUT",
	  t_timeout },
	{ "reset_in_mpa", "a peer that resets instead of an MPA reply: -ECONNRESET",
	  t_reset_in_mpa },
	{ "private_data", "private data of 1 to 240 bytes delivered intact both ways",
	  t_private_data },
	{ "reject", "reject with private data: REJECTED and the data; the listener serves on",
	  t_reject },
	{ "ird_ord", "IRD/ORD of the request reach the listener, crossed", t_ird_ord },
	{ "send_signaled", "signalled SENDs: SEND and RECV completions, byte_len, data",
	  t_send_signaled },
	{ "send_unsignaled", "unsignalled SENDs complete at the receiver only",
	  t_send_unsignaled },
	{ "send_inline", "inline SEND: data copied at post time", t_send_inline },
	{ "send_zero", "zero-byte SEND with no SGE and with an empty SGE", t_send_zero },
	{ "send_solicited", "solicited-only arm: no event for an unsolicited SEND, one for a "
	  "solicited one", t_send_solicited },
	{ "cq_events_once", "one completion event per arm, none without", t_cq_events_once },
	{ "recv_srq", "RECV from an SRQ: order, qp_num, data", t_recv_srq },
	{ "srq_limit", "SRQ limit: one SRQ_LIMIT_REACHED event when receives fall below it, "
	  "then disarmed", t_srq_limit },
	{ "flush", "after a disconnect: posted and new work requests flush with WR_FLUSH_ERR",
	  t_flush },
	{ "recv_too_small", "a SEND longer than the receive buffer: LOC_LEN_ERR, then the "
	  "connection ends", t_recv_too_small },
	{ "abortive", "a client destroyed without disconnect: the server gets DISCONNECTED "
	  "and flushes", t_abortive },
	{ "back_to_back", "100 connections one after the other on one port",
	  t_back_to_back },
	{ "write_integrity", "RDMA Writes of 0 B to 64 KiB at random offsets: data intact, nothing "
	  "outside the target touched", t_write_integrity },
	{ "read_integrity", "RDMA Reads of 0 B to 64 KiB at random offsets, then 8 outstanding "
	  "at once: in order, data intact", t_read_integrity },
	{ "send_integrity", "SENDs of 0 to 256 bytes, 8 in flight: byte_len and data intact",
	  t_send_integrity },
	{ "mixed_order", "Read, SEND, Write, Read, SEND on one QP complete in posting order",
	  t_mixed_order },
	{ "qps_64", "64 connections at once, Write, Read and SEND traffic on all interleaved",
	  t_qps_64 },
	{ "mt_post_poll", "4 threads post Writes to one QP, 2 poll its CQ: each completes once, "
	  "data intact", t_mt_post_poll },
	{ "stream_unsignaled", "16384 Writes from one thread, every 16th signalled, the send queue "
	  "kept full: every post succeeds, data intact", t_stream_unsignaled },
	{ "bad_stag", "a Write with a wrong STag index or key ends its connection; another one "
	  "serves on", t_bad_stag },
	{ "write_out_of_bounds", "a Write past the end of the peer's region ends its "
	  "connection; another one serves on", t_write_out_of_bounds },
};

#define N_TESTS (sizeof(tests) / sizeof(tests[0]))

static int open_ns(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	return fd;
}

/* A line in the kernel log, so that a splat can be told apart by subtest. */
static void kmsg_mark(const char *name)
{
	FILE *f = fopen("/dev/kmsg", "w");

	if (f) {
		fprintf(f, "riw_cm: subtest %s\n", name);
		fclose(f);
	}
}

/* A subtest that has not ended after this many seconds (scaled) is reported failed and
 * the run ends there, so that a hang names its subtest well within kselftest's timeout. */
#define SUBTEST_LIMIT 20

static const char *running;

static void write_str(const char *s)
{
	ssize_t n = write(STDOUT_FILENO, s, strlen(s));

	(void)n;
}

static void on_watchdog(int sig)
{
	(void)sig;
	write_str("watchdog: subtest still running, the run ends here\nRESULT fail ");
	write_str(running);
	write_str(" no end within the subtest time limit\n");
	_exit(3);
}

static int run(int argc, char **argv)
{
	ns_srv = open_ns(argv[0]);
	ns_cli = open_ns(argv[1]);
	drv_srv = argv[2];
	drv_cli = argv[3];
	ch_srv = rdma_create_event_channel();
	ch_cli = rdma_create_event_channel();
	if (!ch_srv || !ch_cli) {
		perror("rdma_create_event_channel");
		return 2;
	}
	signal(SIGALRM, on_watchdog);
	for (unsigned i = 0; i < N_TESTS; i++) {
		bool pick = argc <= 4;

		for (int a = 4; a < argc; a++)
			pick |= !strcmp(argv[a], tests[i].name);
		if (!pick)
			continue;
		n_fail = n_xfail = 0;
		xfail_why[0] = 0;
		diag("--- %s", tests[i].name);
		kmsg_mark(tests[i].name);
		double t0 = now();

		running = tests[i].name;
		alarm(SUBTEST_LIMIT * scale);
		tests[i].fn();
		alarm(0);
		diag("(%.1f s)", now() - t0);
		if (n_fail)
			printf("RESULT fail %s\n", tests[i].name);
		else if (n_xfail)
			printf("RESULT xfail %s %s\n", tests[i].name, xfail_why);
		else
			printf("RESULT pass %s\n", tests[i].name);
		fflush(stdout);
	}
	return 0;
}

/* ---- standalone server and clients for the shell's tests ---- */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

#define MAX_CONNS 64

static int serve(const char *ip, int port)
{
	struct end conns[MAX_CONNS];
	bool hello_first[MAX_CONNS];
	struct rdma_cm_id *l;
	int err;

	memset(conns, 0, sizeof(conns));
	memset(hello_first, 0, sizeof(hello_first));
	signal(SIGTERM, on_term);
	ch_srv = rdma_create_event_channel();
	l = listen_on(ip, port, 64, &err);
	if (!l) {
		fprintf(stderr, "serve: listen on %s port %d: %s\n", ip, port, strerror(err));
		return 1;
	}
	diag("serve: listening on %s port %d", ip, port);
	while (!stop) {
		struct rdma_cm_event *ev = get_event(ch_srv, 20);

		if (ev) {
			struct rdma_cm_id *id = ev->id;
			int i;

			diag("serve: %s status %d private data %d bytes", ev_name(ev->event),
			     ev->status, ev->param.conn.private_data_len);
			switch (ev->event) {
			case RDMA_CM_EVENT_CONNECT_REQUEST: {
				bool hello = ev->param.conn.private_data_len >= 11 &&
					     !memcmp(ev->param.conn.private_data, "hello first", 11);

				rdma_ack_cm_event(ev);
				for (i = 0; i < MAX_CONNS && conns[i].id; i++)
					;
				if (i < MAX_CONNS)
					hello_first[i] = hello;
				struct rdma_conn_param cp;

				conn_param(&cp, "pong", 4, 1, 1);
				if (i == MAX_CONNS || setup_end(&conns[i], id, false, 4) ||
				    rdma_accept(id, &cp)) {
					diag("serve: cannot accept: %m");
					if (i < MAX_CONNS && conns[i].id)
						free_end(&conns[i]);
					else
						rdma_reject(id, NULL, 0), rdma_destroy_id(id);
				}
				break;
			}
			case RDMA_CM_EVENT_ESTABLISHED:
				rdma_ack_cm_event(ev);
				/* The server speaks first. */
				for (i = 0; i < MAX_CONNS; i++)
					if (conns[i].id == id && hello_first[i]) {
						memcpy(conns[i].buf + 12288, "hello", 5);
						post_send(&conns[i], 2, 12288, 5, IBV_SEND_SIGNALED,
							  false);
					}
				break;
			case RDMA_CM_EVENT_DISCONNECTED:
			case RDMA_CM_EVENT_DEVICE_REMOVAL:
			case RDMA_CM_EVENT_CONNECT_ERROR:
			case RDMA_CM_EVENT_UNREACHABLE:
			case RDMA_CM_EVENT_REJECTED:
				rdma_ack_cm_event(ev);
				if (id == l) {
					diag("serve: the listener went away");
					stop = 1;
					break;
				}
				for (i = 0; i < MAX_CONNS; i++)
					if (conns[i].id == id)
						free_end(&conns[i]);
				break;
			default:
				rdma_ack_cm_event(ev);
			}
		}
		/* Answer "ping" with "pong". */
		for (int i = 0; i < MAX_CONNS; i++) {
			struct ibv_wc wc;

			if (!conns[i].id || !conns[i].cq)
				continue;
			while (ibv_poll_cq(conns[i].cq, 1, &wc) == 1) {
				if (wc.status != IBV_WC_SUCCESS) {
					diag("serve: wc %s", st(wc.status));
					continue;
				}
				if (wc.opcode != IBV_WC_RECV)
					continue;
				int off = (wc.wr_id - 1000) % SLOTS * MSG;

				memcpy(conns[i].buf + 8192, conns[i].buf + off, wc.byte_len);
				if (wc.byte_len >= 4)
					memcpy(conns[i].buf + 8192, "pong", 4);
				post_recv(&conns[i], wc.wr_id, off, MSG);
				post_send(&conns[i], 1, 8192, wc.byte_len, IBV_SEND_SIGNALED, false);
			}
		}
	}
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i].id)
			free_end(&conns[i]);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch_srv);
	diag("serve: done");
	return 0;
}

static int ping_once(const char *ip, int port)
{
	struct pair p = { .port = port };
	struct opts o = { .dst_ip = ip, .recvs = 1, .req_pd = "ping", .req_pd_len = 4 };

	if (!start_connect(&p, &o))
		goto out;
	struct rdma_cm_event *ev = expect_ev(ch_cli, RDMA_CM_EVENT_ESTABLISHED, 10000, "ping");

	if (!ev)
		goto out;
	bool ok = ev->event == RDMA_CM_EVENT_ESTABLISHED;

	rdma_ack_cm_event(ev);
	if (!ok)
		goto out;
	memcpy(p.c.buf + 8192, "ping riw_cm", 11);
	post_send(&p.c, 1, 8192, 11, IBV_SEND_SIGNALED, false);
	/* The pong may complete before the ping's send does: the peer can answer while the
	 * send is still being handed to TCP, and the two queues are not ordered. */
	const struct want w[] = { { 1, IBV_WC_SEND, -1 }, { 1000, IBV_WC_RECV, 11 } };

	if (expect_wcs(&p.c, "ping", w, 2) &&
	    check(!memcmp(p.c.buf, "pong riw_cm", 11), "the answer is not pong"))
		diag("ping: sent, pong received");
	if (check(!rdma_disconnect(p.c.id), "rdma_disconnect: %m")) {
		ev = expect_ev(ch_cli, RDMA_CM_EVENT_DISCONNECTED, 10000, "ping");
		if (ev)
			rdma_ack_cm_event(ev);
	}
out:
	free_end(&p.c);
	return n_fail ? 1 : 0;
}

static int ping(const char *ip, int port, int n)
{
	ch_cli = rdma_create_event_channel();
	for (int i = 0; i < n; i++)
		if (ping_once(ip, port)) {
			diag("ping: connection %d of %d failed", i + 1, n);
			return 1;
		}
	diag("ping: %d connections", n);
	return 0;
}

static int hold(const char *ip, int port)
{
	struct pair p = { .port = port };
	struct opts o = { .dst_ip = ip, .recvs = 4 };

	ch_cli = rdma_create_event_channel();
	if (!start_connect(&p, &o))
		return 1;
	for (;;) {
		struct rdma_cm_event *ev = get_event(ch_cli, 3600 * 1000);

		if (!ev)
			continue;
		int e = ev->event;

		diag("%s status %d", ev_name(e), ev->status);
		rdma_ack_cm_event(ev);
		if (e == RDMA_CM_EVENT_ESTABLISHED)
			continue;
		free_end(&p.c);
		rdma_destroy_event_channel(ch_cli);
		return e == RDMA_CM_EVENT_DISCONNECTED || e == RDMA_CM_EVENT_DEVICE_REMOVAL ? 0 : 1;
	}
}

int main(int argc, char **argv)
{
	const char *s = getenv("RIW_TIMEOUT_SCALE");

	if (s && atoi(s) > 0)
		scale = atoi(s);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "list")) {
		for (unsigned i = 0; i < N_TESTS; i++)
			printf("%s %s\n", tests[i].name, tests[i].desc);
		return 0;
	}
	if (argc >= 6 && !strcmp(argv[1], "run"))
		return run(argc - 2, argv + 2);
	if (argc == 4 && !strcmp(argv[1], "serve"))
		return serve(argv[2], atoi(argv[3]));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "ping"))
		return ping(argv[2], atoi(argv[3]), argc == 5 ? atoi(argv[4]) : 1);
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: cm list | run NS_SRV NS_CLI SRV_DRIVER CLI_DRIVER [NAME...] | "
		"serve ADDR PORT | ping ADDR PORT [N] | hold ADDR PORT\n");
	return 2;
}
