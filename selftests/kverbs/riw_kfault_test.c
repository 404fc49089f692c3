// SPDX-License-Identifier: GPL-2.0
/*
 * riw_kfault_test: the verbs a kernel consumer calls, each with the Nth fault point of the
 * calling task failed (current->fail_nth, what /proc/PID/fail-nth sets), for N = 1, 2, ...
 * until the call completes without reaching an Nth one. After each N the call must have
 * succeeded or returned an errno, whatever it created is destroyed, and the same call with
 * nothing injected succeeds. Only this task's fault points count; which ones there are
 * (slab, page allocator) is the caller's choice in debugfs (selftests/riw_fault.sh).
 *
 * Everything runs at load; the module loads only if every check passed. Each check is
 * logged as "riw_kfault_test: ok|not ok N description" for selftests/riw_fault.sh.
 */
#include <linux/module.h>
#include <linux/sched.h>
#include <rdma/ib_verbs.h>

static char *device = "riw0";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "RDMA device to test");
static char *label = "";
module_param(label, charp, 0444);
MODULE_PARM_DESC(label, "Put before each check's description (which fault points fail)");

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
};

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

static void undo(struct objs *o)
{
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
};

static const struct op ops[] = {
	{ "ib_alloc_pd (with its DMA MR)", NULL, alloc_pd },
	{ "ib_alloc_cq polled in softirq", NULL, alloc_cq_softirq },
	{ "ib_alloc_cq polled from a work queue", NULL, alloc_cq_workqueue },
	{ "ib_create_qp with rdma_rw contexts", NULL, create_qp },
	{ "ib_modify_qp to INIT, then to ERROR", create_qp, modify_qp },
	{ "ib_create_srq", NULL, create_srq },
	{ "ib_alloc_mr for fast registration", NULL, alloc_mr },
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
		if (rc) {
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

static int __init riw_kfault_test_init(void)
{
	struct objs o = {};
	int i;

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
	if (!IS_ERR(o.cq)) {
		for (i = 0; i < ARRAY_SIZE(ops); i++)
			run(&ops[i], &o);
		ib_free_cq(o.cq);
	}
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
