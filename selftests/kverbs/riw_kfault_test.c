// SPDX-License-Identifier: GPL-2.0
/*
 * riw_kfault_test: the verbs a kernel consumer calls, each with the Nth fault point of the
 * calling task failed (current->fail_nth, what /proc/PID/fail-nth sets), for N = 1, 2, ...
 * until the call completes without reaching an Nth one. After each N the call must have
 * succeeded or returned an errno, whatever it created is destroyed, and the same call with
 * nothing injected succeeds. Only this task's fault points count; which ones there are
 * (slab, page allocator) is the caller's choice in debugfs (selftests/riw_fault.sh).
 *
 * With netns_pid and addr, rdma_cm's listen, connect and accept are called the same way in
 * that process's network namespace, against the device's address over loopback. A
 * connection whose call succeeded must then be established or end with an error event on
 * the connecting side, within CM_TIMEOUT: never wait for ever.
 *
 * Everything runs at load; the module loads only if every check passed. Each check is
 * logged as "riw_kfault_test: ok|not ok N description" for selftests/riw_fault.sh.
 */
#include <linux/module.h>
#include <linux/inet.h>
#include <linux/sched.h>
#include <linux/wait.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

static char *device = "riw0";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "RDMA device to test");
static char *label = "";
module_param(label, charp, 0444);
MODULE_PARM_DESC(label, "Put before each check's description (which fault points fail)");
static int netns_pid;
module_param(netns_pid, int, 0444);
MODULE_PARM_DESC(netns_pid, "A process in the device's network namespace (0: no rdma_cm calls)");
static char *addr = "";
module_param(addr, charp, 0444);
MODULE_PARM_DESC(addr, "The device's IPv4 address, for the rdma_cm calls");

#define LISTEN_PORT 7490
#define CONNECT_PORT 7491
/* Longer than a connection takes on the debug kernel under TCG. */
#define CM_TIMEOUT (30 * HZ)

/* More fault points than any of these calls has; reaching it is a failure. */
#define MAX_NTH 2000

static int checks, failures;

static void check(bool ok, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	checks++;
	if (!ok)
		failures++;
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("riw_kfault_test: %s %d %s%s%pV\n", ok ? "ok" : "not ok", checks, label,
		*label ? ": " : "", &vaf);
	va_end(args);
}

struct objs {
	struct ib_device *dev;
	struct ib_pd *pd;    /* the fixture's, for the calls that need one */
	struct ib_cq *cq;    /* the fixture's */
	struct ib_pd *new_pd;
	struct ib_cq *new_cq;
	struct ib_qp *qp;
	struct ib_srq *srq;
	struct ib_mr *mr;
	/* rdma_cm: NULL net when not asked for */
	struct net *net;
	struct sockaddr_in listen_addr, connect_addr;
	struct rdma_cm_id *server_listener; /* the fixture's, on CONNECT_PORT */
	struct rdma_cm_id *listen_id;       /* the listen call's */
	struct rdma_cm_id *cid;             /* the connecting side */
	bool hung;                          /* a connection neither completed nor failed */
};

/*
 * What one end of a connection saw: the last event and, on the server side, the id of the
 * connection request. The server's events come from the fixture's listener and the ids
 * it creates, the client's from o->cid; both from rdma_cm's work queues.
 */
struct cm_side {
	spinlock_t lock;
	struct rdma_cm_id *request;
	int event; /* -1: none yet */
	wait_queue_head_t wq;
};

static struct cm_side server_side, client_side;

static int err_of(const void *p)
{
	return IS_ERR(p) ? PTR_ERR(p) : 0;
}

static int alloc_pd(struct objs *o)
{
	o->new_pd = ib_alloc_pd(o->dev, 0);
	return err_of(o->new_pd);
}

static int alloc_cq(struct objs *o, enum ib_poll_context poll)
{
	o->new_cq = ib_alloc_cq(o->dev, NULL, 64, 0, poll);
	return err_of(o->new_cq);
}

static int alloc_cq_softirq(struct objs *o)
{
	return alloc_cq(o, IB_POLL_SOFTIRQ);
}

static int alloc_cq_workqueue(struct objs *o)
{
	return alloc_cq(o, IB_POLL_WORKQUEUE);
}

static int create_qp(struct objs *o)
{
	struct ib_qp_init_attr init = {
		.send_cq = o->cq,
		.recv_cq = o->cq,
		.cap = { .max_send_wr = 128, .max_recv_wr = 64, .max_send_sge = 4,
			 .max_recv_sge = 2, .max_rdma_ctxs = 16 },
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.port_num = 1,
	};

	o->qp = ib_create_qp(o->pd, &init);
	return err_of(o->qp);
}

static int modify_qp(struct objs *o)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE,
	};
	int rc;

	rc = ib_modify_qp(o->qp, &attr, IB_QP_STATE | IB_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	attr.qp_state = IB_QPS_ERR;
	return ib_modify_qp(o->qp, &attr, IB_QP_STATE);
}

static int create_srq(struct objs *o)
{
	struct ib_srq_init_attr init = { .attr = { .max_wr = 64, .max_sge = 2 } };

	o->srq = ib_create_srq(o->pd, &init);
	return err_of(o->srq);
}

static int alloc_mr(struct objs *o)
{
	o->mr = ib_alloc_mr(o->pd, IB_MR_TYPE_MEM_REG, 256);
	return err_of(o->mr);
}

/* rdma_cm's events: remember them; a second connection request is refused. */
static int cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct cm_side *side = id->context;
	unsigned long flags;
	int refuse = 0;

	if (!side)
		return ev->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	spin_lock_irqsave(&side->lock, flags);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (side->request)
			refuse = 1;
		else
			side->request = id;
	}
	if (!refuse)
		side->event = ev->event;
	spin_unlock_irqrestore(&side->lock, flags);
	/* A waiter for the server may wait for the client's end too (server_request). */
	wake_up(&server_side.wq);
	wake_up(&client_side.wq);
	return refuse;
}

static void cm_side_reset(struct cm_side *side)
{
	spin_lock_irq(&side->lock);
	side->request = NULL;
	side->event = -1;
	spin_unlock_irq(&side->lock);
}

static int cm_side_event(struct cm_side *side)
{
	int ev;

	spin_lock_irq(&side->lock);
	ev = side->event;
	spin_unlock_irq(&side->lock);
	return ev;
}

static bool cm_ended(int ev)
{
	return ev == RDMA_CM_EVENT_ESTABLISHED || ev == RDMA_CM_EVENT_REJECTED ||
	       ev == RDMA_CM_EVENT_CONNECT_ERROR || ev == RDMA_CM_EVENT_UNREACHABLE ||
	       ev == RDMA_CM_EVENT_DISCONNECTED || ev == RDMA_CM_EVENT_ADDR_ERROR ||
	       ev == RDMA_CM_EVENT_ROUTE_ERROR;
}

/* Waits for the client's connection to end one way or the other: 0 when established. */
static int client_outcome(struct objs *o)
{
	int ev = -1;

	if (!wait_event_timeout(client_side.wq, cm_ended(ev = cm_side_event(&client_side)),
				CM_TIMEOUT)) {
		o->hung = true;
		return -ETIMEDOUT;
	}
	return ev == RDMA_CM_EVENT_ESTABLISHED ? 0 : -ECONNABORTED;
}

static int wait_client_event(enum rdma_cm_event_type want)
{
	int ev = -1;

	wait_event_timeout(client_side.wq, (ev = cm_side_event(&client_side)) == want ||
			   cm_ended(ev), CM_TIMEOUT);
	return ev == want ? 0 : -EHOSTUNREACH;
}

static struct rdma_cm_id *server_side_request(void)
{
	struct rdma_cm_id *id;

	spin_lock_irq(&server_side.lock);
	id = server_side.request;
	spin_unlock_irq(&server_side.lock);
	return id;
}

/*
 * The server's connection request, once it came: NULL after CM_TIMEOUT, or, with
 * client_may_end, once the connecting side ended without one.
 */
static struct rdma_cm_id *server_request(bool client_may_end)
{
	struct rdma_cm_id *id = NULL;

	wait_event_timeout(server_side.wq, (id = server_side_request()) ||
			   (client_may_end && cm_ended(cm_side_event(&client_side))),
			   CM_TIMEOUT);
	return id;
}

static int cm_create_qp(struct objs *o, struct rdma_cm_id *id)
{
	struct ib_qp_init_attr init = {
		.send_cq = o->cq,
		.recv_cq = o->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
	};

	return rdma_create_qp(id, o->pd, &init);
}

static struct rdma_conn_param conn_param = {
	.initiator_depth = 1, .responder_resources = 1, .retry_count = 7,
};

static int listen_prepare(struct objs *o)
{
	o->listen_id = rdma_create_id(o->net, cm_handler, NULL, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(o->listen_id))
		return PTR_ERR(o->listen_id);
	return rdma_bind_addr(o->listen_id, (struct sockaddr *)&o->listen_addr);
}

static int listen_call(struct objs *o)
{
	return rdma_listen(o->listen_id, 8);
}

/* The connecting side resolved, with its QP. */
static int connect_prepare(struct objs *o)
{
	int rc;

	cm_side_reset(&client_side);
	o->cid = rdma_create_id(o->net, cm_handler, &client_side, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(o->cid))
		return PTR_ERR(o->cid);
	rc = rdma_resolve_addr(o->cid, NULL, (struct sockaddr *)&o->connect_addr, 5000);
	if (!rc)
		rc = wait_client_event(RDMA_CM_EVENT_ADDR_RESOLVED);
	if (!rc)
		rc = rdma_resolve_route(o->cid, 5000);
	if (!rc)
		rc = wait_client_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
	return rc ?: cm_create_qp(o, o->cid);
}

static int connect_call(struct objs *o)
{
	return rdma_connect(o->cid, &conn_param);
}

/* The server's rdma_create_qp and rdma_accept, outside its event handler. */
static int accept_request(struct objs *o, struct rdma_cm_id *id)
{
	int rc;

	rc = cm_create_qp(o, id);
	if (rc)
		return rc;
	rdma_lock_handler(id);
	rc = rdma_accept(id, &conn_param);
	rdma_unlock_handler(id);
	return rc;
}

/* A connect that returned 0: the server accepts what comes, the client must end. */
static int connect_settle(struct objs *o, int rc)
{
	struct rdma_cm_id *id;

	if (rc)
		return rc;
	id = server_request(true);
	if (id)
		accept_request(o, id);
	return client_outcome(o);
}

/* Connected up to the server's connection request, with the server's QP to come. */
static int accept_prepare(struct objs *o)
{
	int rc = connect_prepare(o);

	if (!rc)
		rc = rdma_connect(o->cid, &conn_param);
	if (!rc && !server_request(false))
		rc = -ETIMEDOUT;
	return rc;
}

static int accept_call(struct objs *o)
{
	return accept_request(o, server_side.request);
}

/* Accepted: the client is established (or ends); refused: the client must end. */
static int accept_settle(struct objs *o, int rc)
{
	int outcome = client_outcome(o);

	return rc ?: outcome;
}

static void undo(struct objs *o)
{
	struct rdma_cm_id *request;

	if (!IS_ERR_OR_NULL(o->mr))
		ib_dereg_mr(o->mr);
	if (!IS_ERR_OR_NULL(o->srq))
		ib_destroy_srq(o->srq);
	if (!IS_ERR_OR_NULL(o->qp))
		ib_destroy_qp(o->qp);
	if (!IS_ERR_OR_NULL(o->new_cq))
		ib_free_cq(o->new_cq);
	if (!IS_ERR_OR_NULL(o->new_pd))
		ib_dealloc_pd(o->new_pd);
	if (!IS_ERR_OR_NULL(o->cid)) {
		if (o->cid->qp)
			rdma_destroy_qp(o->cid);
		rdma_destroy_id(o->cid);
	}
	if (!IS_ERR_OR_NULL(o->listen_id))
		rdma_destroy_id(o->listen_id);
	spin_lock_irq(&server_side.lock);
	request = server_side.request;
	server_side.request = NULL;
	spin_unlock_irq(&server_side.lock);
	if (request) {
		if (request->qp)
			rdma_destroy_qp(request);
		rdma_destroy_id(request);
	}
	o->cid = NULL;
	o->listen_id = NULL;
	o->mr = NULL;
	o->srq = NULL;
	o->qp = NULL;
	o->new_cq = NULL;
	o->new_pd = NULL;
}

#ifdef CONFIG_FAULT_INJECTION
static void fail_nth_set(unsigned int n)
{
	WRITE_ONCE(current->fail_nth, n);
}

/* Ends the injection; true when the Nth fault point was reached (and failed). */
static bool fail_nth_end(void)
{
	bool injected = !READ_ONCE(current->fail_nth);

	WRITE_ONCE(current->fail_nth, 0);
	return injected;
}
#else
static void fail_nth_set(unsigned int n)
{
}

static bool fail_nth_end(void)
{
	return false;
}
#endif

struct op {
	const char *desc;
	int (*prepare)(struct objs *o); /* not injected */
	int (*call)(struct objs *o);
	/* not injected: what came of the call's result (a connection's outcome) */
	int (*settle)(struct objs *o, int rc);
	bool cm;
};

static const struct op ops[] = {
	{ "ib_alloc_pd (with its DMA MR)", NULL, alloc_pd },
	{ "ib_alloc_cq polled in softirq", NULL, alloc_cq_softirq },
	{ "ib_alloc_cq polled from a work queue", NULL, alloc_cq_workqueue },
	{ "ib_create_qp with rdma_rw contexts", NULL, create_qp },
	{ "ib_modify_qp to INIT, then to ERROR", create_qp, modify_qp },
	{ "ib_create_srq", NULL, create_srq },
	{ "ib_alloc_mr for fast registration", NULL, alloc_mr },
	{ "rdma_listen", listen_prepare, listen_call, NULL, true },
	{ "rdma_connect, then established or an error event", connect_prepare, connect_call,
	  connect_settle, true },
	{ "rdma_create_qp and rdma_accept on a connection request, then established or an "
	  "error event on the connecting side", accept_prepare, accept_call, accept_settle, true },
};

/* One attempt: N > 0 injects; returns the call's result, *injected whether N was reached. */
static int attempt(const struct op *op, struct objs *o, unsigned int n, bool *injected)
{
	int rc = 0;

	*injected = false;
	if (op->prepare)
		rc = op->prepare(o);
	if (!rc) {
		if (n)
			fail_nth_set(n);
		rc = op->call(o);
		if (n)
			*injected = fail_nth_end();
		if (op->settle)
			rc = op->settle(o, rc);
	}
	undo(o);
	return rc;
}

static void run(const struct op *op, struct objs *o)
{
	unsigned int n, errors = 0, survived = 0;
	bool injected;
	int rc;

	for (n = 1; n <= MAX_NTH; n++) {
		rc = attempt(op, o, n, &injected);
		if (o->hung) {
			check(false, "%s: N=%u: the connection neither completed nor ended in %d s",
			      op->desc, n, CM_TIMEOUT / HZ);
			return;
		}
		if (!injected) {
			if (rc) {
				check(false, "%s: N=%u failed (%d) with no fault injected", op->desc,
				      n, rc);
				return;
			}
			break;
		}
		if (rc)
			errors++;
		else
			survived++;
		/* The device still works: the same call, nothing injected. */
		rc = attempt(op, o, 0, &injected);
		if (rc || o->hung) {
			check(false, "%s: after N=%u it fails (%d) with nothing injected", op->desc,
			      n, rc);
			return;
		}
	}
	pr_info("riw_kfault_test: # %s%s%s: %u fault points, failed with an errno after %u, "
		"succeeded anyway after %u\n", label, *label ? ": " : "", op->desc, n - 1, errors,
		survived);
	check(n <= MAX_NTH, "%s: each fault point failed in turn, cleanly", op->desc);
}

/* The rdma_cm calls' namespace, addresses and listener for connections to come to. */
static void cm_fixture(struct objs *o)
{
	struct rdma_cm_id *id;
	struct net *net;
	__be32 ip;

	net = get_net_ns_by_pid(netns_pid);
	if (IS_ERR(net) || !in4_pton(addr, -1, (u8 *)&ip, -1, NULL)) {
		check(false, "the rdma_cm calls' namespace (pid %d) and address (%s)", netns_pid,
		      addr);
		if (!IS_ERR(net))
			put_net(net);
		return;
	}
	o->net = net;
	o->listen_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = ip,
					       .sin_port = htons(LISTEN_PORT) };
	o->connect_addr = o->listen_addr;
	o->connect_addr.sin_port = htons(CONNECT_PORT);
	id = rdma_create_id(net, cm_handler, &server_side, RDMA_PS_TCP, IB_QPT_RC);
	if (!IS_ERR(id) && (rdma_bind_addr(id, (struct sockaddr *)&o->connect_addr) ||
			    rdma_listen(id, 16))) {
		rdma_destroy_id(id);
		id = ERR_PTR(-EINVAL);
	}
	check(!IS_ERR(id), "an rdma_cm listener on %s port %d for the connections", addr,
	      CONNECT_PORT);
	if (!IS_ERR(id))
		o->server_listener = id;
}

static int __init riw_kfault_test_init(void)
{
	struct objs o = {};
	int i;

	spin_lock_init(&server_side.lock);
	spin_lock_init(&client_side.lock);
	init_waitqueue_head(&server_side.wq);
	init_waitqueue_head(&client_side.wq);
	cm_side_reset(&server_side);
	cm_side_reset(&client_side);
	if (!IS_ENABLED(CONFIG_FAULT_INJECTION)) {
		pr_err("riw_kfault_test: the kernel has no CONFIG_FAULT_INJECTION\n");
		return -EOPNOTSUPP;
	}
	o.dev = ib_device_get_by_name(device, RDMA_DRIVER_UNKNOWN);
	if (!o.dev) {
		pr_err("riw_kfault_test: no device %s\n", device);
		return -ENODEV;
	}
	o.pd = ib_alloc_pd(o.dev, 0);
	o.cq = IS_ERR(o.pd) ? ERR_PTR(-EINVAL) : ib_alloc_cq(o.dev, NULL, 64, 0, IB_POLL_SOFTIRQ);
	check(!IS_ERR(o.cq), "the fixture's PD and CQ");
	if (netns_pid && !IS_ERR(o.cq))
		cm_fixture(&o);
	if (!IS_ERR(o.cq)) {
		for (i = 0; i < ARRAY_SIZE(ops); i++)
			if (!ops[i].cm || o.server_listener)
				run(&ops[i], &o);
		if (o.server_listener)
			rdma_destroy_id(o.server_listener);
		undo(&o);
		ib_free_cq(o.cq);
	}
	if (o.net)
		put_net(o.net);
	if (!IS_ERR(o.pd))
		ib_dealloc_pd(o.pd);
	ib_device_put(o.dev);
	pr_info("riw_kfault_test: %d checks, %d failed\n", checks, failures);
	return failures ? -EIO : 0;
}

static void __exit riw_kfault_test_exit(void)
{
}

module_init(riw_kfault_test_init);
module_exit(riw_kfault_test_exit);
MODULE_DESCRIPTION("Kernel verbs of riw with their allocations failed in turn");
MODULE_LICENSE("GPL");
