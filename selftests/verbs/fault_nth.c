// SPDX-License-Identifier: GPL-2.0
/*
 * The part of riw_fault.sh that runs in userspace: every verbs and rdma_cm call an
 * application makes, from opening the device to accepting a connection, with the Nth fault
 * point of the calling thread failed (/proc/thread-self/fail-nth), for N = 1, 2, ... until
 * the call completes without reaching an Nth one. After each N:
 *
 *   the call succeeded, or failed with an errno (connect and accept: or with an error
 *   event on the connecting side, which never waits for ever);
 *   whatever it created is destroyed, and the connection's other side goes away;
 *   the same call without a failure succeeds (the device still works).
 *
 * Only this thread's fault points count: riw's work items, the kernel's other threads and
 * the server thread of the connection tests are not touched. Which fault points there are
 * (slab, page allocator) is riw_fault.sh's choice, in debugfs.
 *
 *   fault_nth --list
 *   fault_nth DEVICE ADDRESS [NAME...]   ADDRESS is the device's IPv4 address; the connection
 *                                        tests connect to it from it
 *
 * Prints one line "RESULT pass|fail NAME [reason]" per subtest, everything else is
 * diagnostics. Exit status 0 when the run completed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

enum result { PASS, FAIL };
static const char *result_name[] = { "pass", "fail" };

/* More fault points than any of these calls has; reaching it is a failure. */
#define MAX_NTH 2000
#define LISTEN_PORT 7480
#define CONNECT_PORT 7481

static struct ibv_device *device;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct sockaddr_in addr;
static int event_timeout_ms = 20000;
static char buf[8192] __attribute__((aligned(4096)));
static char reason[256];

static void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* ---- fail-nth of the calling thread ---- */

static int fail_nth_fd(void)
{
	static __thread int fd = -1;

	if (fd < 0)
		fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	return fd;
}

static void fail_nth_set(unsigned int n)
{
	char s[16];
	int len = snprintf(s, sizeof(s), "%u", n);

	if (pwrite(fail_nth_fd(), s, len, 0) != len) {
		perror("fail-nth");
		exit(1);
	}
}

/* Ends the injection; true when the Nth fault point was reached (and failed). */
static bool fail_nth_end(void)
{
	char s[16] = "";
	bool injected;

	if (pread(fail_nth_fd(), s, sizeof(s) - 1, 0) <= 0) {
		perror("fail-nth");
		exit(1);
	}
	injected = strtoul(s, NULL, 10) == 0;
	fail_nth_set(0);
	return injected;
}

/* ---- the operations: prepare (no injection), call (injected), undo ---- */

struct state {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	enum rdma_cm_event_type event; /* the last one the connecting side saw */
};

/*
 * The result of a call: 0, or the errno it failed with, or one of these. Only an errno, or
 * for the connecting side an error event, is an acceptable failure.
 */
#define NO_ERRNO (-1) /* failed, errno not set */
#define HUNG (-2)     /* the connecting side saw no event */
#define LOST (-3)     /* no connection request reached the server */
static int errno_or_unknown(void)
{
	return errno ? errno : NO_ERRNO;
}

static int open_device_call(struct state *s)
{
	errno = 0;
	s->ctx = ibv_open_device(device);
	return s->ctx ? 0 : errno_or_unknown();
}

static int alloc_pd_call(struct state *s)
{
	errno = 0;
	s->pd = ibv_alloc_pd(ctx);
	return s->pd ? 0 : errno_or_unknown();
}

static int create_cq_call(struct state *s)
{
	errno = 0;
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	return s->cq ? 0 : errno_or_unknown();
}

static struct ibv_qp_init_attr qp_attr(void)
{
	return (struct ibv_qp_init_attr){
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 32, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 2 },
		.qp_type = IBV_QPT_RC,
	};
}

static int create_qp_call(struct state *s)
{
	struct ibv_qp_init_attr a = qp_attr();

	errno = 0;
	s->qp = ibv_create_qp(pd, &a);
	return s->qp ? 0 : errno_or_unknown();
}

static int create_srq_call(struct state *s)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 32, .max_sge = 2 } };

	errno = 0;
	s->srq = ibv_create_srq(pd, &a);
	return s->srq ? 0 : errno_or_unknown();
}

static int reg_mr_call(struct state *s)
{
	errno = 0;
	s->mr = ibv_reg_mr(pd, buf, sizeof(buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return s->mr ? 0 : errno_or_unknown();
}

static int modify_qp_prepare(struct state *s)
{
	return create_qp_call(s);
}

static int modify_qp_call(struct state *s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	int rc;

	rc = ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE);
}

static int listen_call(struct state *s)
{
	struct sockaddr_in a = addr;

	a.sin_port = htons(LISTEN_PORT);
	if (rdma_create_id(s->ch, &s->id, NULL, RDMA_PS_TCP))
		return errno_or_unknown();
	if (rdma_bind_addr(s->id, (struct sockaddr *)&a) || rdma_listen(s->id, 8))
		return errno_or_unknown();
	return 0;
}

static int channel_prepare(struct state *s)
{
	s->ch = rdma_create_event_channel();
	return s->ch ? 0 : errno_or_unknown();
}

/* The next event of the connecting side's channel, acknowledged; -1 when none came. */
static int next_event(struct state *s, struct rdma_cm_id **id, int *status)
{
	struct pollfd p = { .fd = s->ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	int type;

	if (poll(&p, 1, event_timeout_ms) != 1 || rdma_get_cm_event(s->ch, &e))
		return -1;
	type = e->event;
	if (id)
		*id = e->id;
	if (status)
		*status = e->status;
	rdma_ack_cm_event(e);
	return type;
}

/* Waits for one event on the connecting side: 0 if it is WANT, else an errno-like code. */
static int expect_event(struct state *s, enum rdma_cm_event_type want)
{
	int type = next_event(s, NULL, NULL);

	if (type < 0) {
		diag("no event in %d ms (waiting for %s)", event_timeout_ms,
		     rdma_event_str(want));
		return HUNG;
	}
	s->event = type;
	return type == (int)want ? 0 : ECONNABORTED;
}

/* ---- the server of the connection tests, in a thread of its own ---- */

static struct {
	pthread_mutex_t lock;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
	int live;              /* connections not yet destroyed */
	unsigned int accept_nth; /* fail-nth for the next accept, 0 for none */
	bool accept_injected;
	int accept_rc;
	bool accepted;         /* an accept was attempted since the last reset */
} server = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void server_drop(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
	pthread_mutex_lock(&server.lock);
	server.live--;
	pthread_mutex_unlock(&server.lock);
}

static void server_request(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = qp_attr();
	unsigned int nth;
	bool injected = false;
	int rc;

	pthread_mutex_lock(&server.lock);
	server.live++;
	nth = server.accept_nth;
	pthread_mutex_unlock(&server.lock);
	if (nth)
		fail_nth_set(nth);
	rc = rdma_create_qp(id, pd, &a);
	if (!rc)
		rc = rdma_accept(id, NULL);
	if (rc)
		rc = errno_or_unknown();
	if (nth)
		injected = fail_nth_end();
	pthread_mutex_lock(&server.lock);
	server.accept_injected = injected;
	server.accept_rc = rc;
	server.accepted = true;
	pthread_mutex_unlock(&server.lock);
	if (rc)
		server_drop(id); /* destroying a request not accepted rejects it */
}

static void *server_main(void *arg)
{
	struct rdma_cm_event *e;

	(void)arg;
	while (!rdma_get_cm_event(server.ch, &e)) {
		struct rdma_cm_id *id = e->id;
		enum rdma_cm_event_type type = e->event;

		rdma_ack_cm_event(e);
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			server_request(id);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
			server_drop(id);
			break;
		default:
			break;
		}
	}
	return NULL;
}

static int server_start(void)
{
	struct sockaddr_in a = addr;
	pthread_t t;

	a.sin_port = htons(CONNECT_PORT);
	server.ch = rdma_create_event_channel();
	if (!server.ch || rdma_create_id(server.ch, &server.listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(server.listen_id, (struct sockaddr *)&a) ||
	    rdma_listen(server.listen_id, 16) || pthread_create(&t, NULL, server_main, NULL)) {
		diag("the server: %s", strerror(errno));
		return -1;
	}
	pthread_detach(t);
	return 0;
}

/* Waits until the server has destroyed every connection: false if one stays. */
static bool server_idle(void)
{
	for (int ms = 0; ms < event_timeout_ms; ms += 10) {
		int live;

		pthread_mutex_lock(&server.lock);
		live = server.live;
		pthread_mutex_unlock(&server.lock);
		if (!live)
			return true;
		usleep(10000);
	}
	diag("the server still holds a connection after %d ms", event_timeout_ms);
	return false;
}

/* The connecting side: resolve, create the QP, connect, up to ESTABLISHED. */
static int connect_call(struct state *s)
{
	struct ibv_qp_init_attr a = qp_attr();
	struct sockaddr_in dst = addr;
	int rc;

	dst.sin_port = htons(CONNECT_PORT);
	s->event = 0;
	if (rdma_create_id(s->ch, &s->id, NULL, RDMA_PS_TCP))
		return errno_or_unknown();
	if (rdma_resolve_addr(s->id, NULL, (struct sockaddr *)&dst, 2000))
		return errno_or_unknown();
	rc = expect_event(s, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rc)
		return rc;
	if (rdma_resolve_route(s->id, 2000))
		return errno_or_unknown();
	rc = expect_event(s, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (rc)
		return rc;
	if (rdma_create_qp(s->id, pd, &a))
		return errno_or_unknown();
	if (rdma_connect(s->id, &(struct rdma_conn_param){ .retry_count = 7 }))
		return errno_or_unknown();
	return expect_event(s, RDMA_CM_EVENT_ESTABLISHED);
}

static bool connect_undo(struct state *s)
{
	bool ok = true;

	if (!s->id)
		return true;
	if (s->event == RDMA_CM_EVENT_ESTABLISHED) {
		rdma_disconnect(s->id);
		if (expect_event(s, RDMA_CM_EVENT_DISCONNECTED)) {
			diag("no DISCONNECTED after rdma_disconnect");
			ok = false;
		}
	}
	if (s->id->qp)
		rdma_destroy_qp(s->id);
	rdma_destroy_id(s->id);
	s->id = NULL;
	return server_idle() && ok;
}

static int accept_prepare(struct state *s)
{
	pthread_mutex_lock(&server.lock);
	server.accepted = false;
	pthread_mutex_unlock(&server.lock);
	return channel_prepare(s);
}

/*
 * The server's accept is the call: the connecting side only reports how it ended (its
 * result is not the call's). What the server's call returned is read back here.
 */
static int accept_outcome(struct state *s, bool *injected)
{
	int rc;

	if (connect_call(s) == HUNG)
		return HUNG;
	/* The connecting side may see ESTABLISHED before rdma_accept returns. */
	for (int ms = 0;; ms += 10) {
		pthread_mutex_lock(&server.lock);
		if (server.accepted)
			break;
		pthread_mutex_unlock(&server.lock);
		if (ms >= event_timeout_ms)
			return LOST;
		usleep(10000);
	}
	rc = server.accept_rc;
	*injected = server.accept_injected;
	pthread_mutex_unlock(&server.lock);
	if (!rc && s->event != RDMA_CM_EVENT_ESTABLISHED) {
		diag("the server accepted, the connecting side saw %s",
		     s->event ? rdma_event_str(s->event) : "no event");
		return ECONNABORTED;
	}
	return rc;
}

static bool undo(struct state *s)
{
	bool ok = connect_undo(s);

	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->ch)
		rdma_destroy_event_channel(s->ch);
	*s = (struct state){};
	return ok;
}

struct op {
	const char *name;
	const char *desc;
	int (*prepare)(struct state *s);
	int (*call)(struct state *s);
	bool server; /* the call is the server's accept */
};

static const struct op ops[] = {
	{ "open_device", "ibv_open_device: the user context", NULL, open_device_call },
	{ "alloc_pd", "ibv_alloc_pd", NULL, alloc_pd_call },
	{ "create_cq", "ibv_create_cq: the CQ and its mmapped ring", NULL, create_cq_call },
	{ "create_qp", "ibv_create_qp: the QP and its mmapped SQ and RQ", NULL, create_qp_call },
	{ "create_srq", "ibv_create_srq: the SRQ and its mmapped ring", NULL, create_srq_call },
	{ "reg_mr", "ibv_reg_mr: 8 KiB of user memory pinned", NULL, reg_mr_call },
	{ "modify_qp", "ibv_modify_qp: new access flags in INIT, then to ERROR", modify_qp_prepare, modify_qp_call },
	{ "listen", "rdma_create_id, rdma_bind_addr, rdma_listen", channel_prepare, listen_call },
	{ "connect", "rdma_resolve_addr/route, rdma_create_qp, rdma_connect to ESTABLISHED",
	  channel_prepare, connect_call },
	{ "accept", "the server's rdma_create_qp and rdma_accept on a connection request",
	  accept_prepare, NULL, true },
};

/* One attempt: N > 0 injects; returns the call's result, *injected whether N was reached. */
static int attempt(const struct op *op, unsigned int n, bool *injected, bool *clean)
{
	struct state s = {};
	int rc;

	*injected = false;
	if (op->prepare && (rc = op->prepare(&s))) {
		diag("preparing %s: %s", op->name, strerror(rc));
		undo(&s);
		return rc;
	}
	if (op->server) {
		pthread_mutex_lock(&server.lock);
		server.accept_nth = n;
		pthread_mutex_unlock(&server.lock);
		rc = accept_outcome(&s, injected);
		pthread_mutex_lock(&server.lock);
		server.accept_nth = 0;
		pthread_mutex_unlock(&server.lock);
	} else {
		if (n)
			fail_nth_set(n);
		rc = op->call(&s);
		if (n)
			*injected = fail_nth_end();
	}
	*clean = undo(&s);
	return rc;
}

static enum result run(const struct op *op)
{
	unsigned int n, failed_errno = 0, succeeded = 0;
	bool injected, clean;
	char errnos[128] = "";
	int rc;

	for (n = 1; n <= MAX_NTH; n++) {
		rc = attempt(op, n, &injected, &clean);
		if (!clean) {
			snprintf(reason, sizeof(reason), "N=%u: not cleaned up", n);
			return FAIL;
		}
		if (!injected) {
			if (rc) {
				snprintf(reason, sizeof(reason),
					 "N=%u: failed (%d) with no fault injected", n, rc);
				return FAIL;
			}
			break;
		}
		if (rc < 0) {
			snprintf(reason, sizeof(reason), "N=%u: %s", n,
				 rc == HUNG   ? "the connecting side waits for ever" :
				 rc == LOST   ? "no connection request reached the server" :
						"failed without an errno");
			return FAIL;
		}
		if (rc) {
			char e[16];

			failed_errno++;
			snprintf(e, sizeof(e), " %d", rc);
			if (!strstr(errnos, e) && strlen(errnos) + strlen(e) < sizeof(errnos))
				strcat(errnos, e);
		} else {
			succeeded++;
		}
		/* The device still works: the same call, nothing injected. */
		rc = attempt(op, 0, &injected, &clean);
		if (rc || !clean) {
			snprintf(reason, sizeof(reason),
				 "after N=%u the call fails (%d) with nothing injected", n, rc);
			return FAIL;
		}
	}
	if (n > MAX_NTH) {
		snprintf(reason, sizeof(reason), "still reaching fault points at N=%u", MAX_NTH);
		return FAIL;
	}
	diag("%s: %u fault points; failed with an errno after %u (errnos%s), succeeded anyway "
	     "after %u", op->name, n - 1, failed_errno, errnos[0] ? errnos : " none", succeeded);
	return PASS;
}

int main(int argc, char **argv)
{
	struct ibv_context **list;
	const char *scale = getenv("RIW_TIMEOUT_SCALE");
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
			printf("%s %s\n", ops[i].name, ops[i].desc);
		return 0;
	}
	if (argc < 3 || inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) {
		fprintf(stderr, "usage: %s --list | DEVICE ADDRESS [TEST...]\n", argv[0]);
		return 2;
	}
	addr.sin_family = AF_INET;
	if (scale && atoi(scale) > 0)
		event_timeout_ms *= atoi(scale);
	if (fail_nth_fd() < 0) {
		perror("/proc/thread-self/fail-nth");
		return 1;
	}
	/*
	 * No page faults inside an injected call: a failed page-table allocation there would be
	 * the fault handler's, not the call's.
	 */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		diag("mlockall: %s", strerror(errno));
	/*
	 * The context librdmacm opened: rdma_cm's QPs must be on the PD and CQ of the context of
	 * their cm_id, and librdmacm opens each device once.
	 */
	list = rdma_get_devices(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]->device), argv[1]))
			ctx = list[i];
	rdma_free_devices(list);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 64, NULL, NULL, 0))) {
		fprintf(stderr, "cannot set up device %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	device = ctx->device;
	if (server_start())
		return 1;
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		bool want = argc == 3;
		enum result r;

		for (int j = 3; j < argc; j++)
			want |= !strcmp(argv[j], ops[i].name);
		if (!want)
			continue;
		reason[0] = 0;
		diag("--- %s: %s", ops[i].name, ops[i].desc);
		r = run(&ops[i]);
		printf("RESULT %s %s%s%s\n", result_name[r], ops[i].name, reason[0] ? " " : "",
		       reason);
	}
	return 0;
}
