// SPDX-License-Identifier: GPL-2.0
/*
 * riw_kverbs_test: checks the verbs paths of an RDMA device that only kernel consumers
 * reach, as a kernel consumer does: PD (with its DMA MR), CQ polling and arming, QP
 * posting in each state, flushes into the CQ, SRQ posting, fast-registration MRs and
 * their page mapping.
 * Everything runs at load; the module loads only if every check passed. Each check is
 * logged as "riw_kverbs_test: ok|not ok N description" for selftests/riw_kverbs.sh.
 */
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

static char *device = "riw0";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "RDMA device to test");

static int checks, failures;
static atomic_t completion_events = ATOMIC_INIT(0);

static void check(bool ok, const char *desc)
{
	checks++;
	if (!ok)
		failures++;
	pr_info("riw_kverbs_test: %s %d %s\n", ok ? "ok" : "not ok", checks, desc);
}

static void comp_handler(struct ib_cq *cq, void *ctx)
{
	atomic_inc(&completion_events);
}

static int modify_state(struct ib_qp *qp, enum ib_qp_state state, int extra_mask)
{
	struct ib_qp_attr attr = {
		.qp_state = state,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE,
		.port_num = 1,
	};

	return ib_modify_qp(qp, &attr, IB_QP_STATE | extra_mask);
}

static noinline void run_qp_checks(struct ib_pd *pd, struct ib_cq *cq, void *buf)
{
	struct ib_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2,
			 .max_recv_sge = 2 },
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
	};
	struct ib_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = pd->local_dma_lkey };
	struct ib_sge three[3] = { sge, sge, sge };
	struct ib_recv_wr rwr[3] = {};
	struct ib_send_wr swr = { .wr_id = 100, .sg_list = &sge, .num_sge = 1,
				  .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	const struct ib_recv_wr *bad_rwr;
	const struct ib_send_wr *bad_swr;
	static struct ib_wc wc[8];
	struct ib_qp *qp;
	int i, n, rc;

	qp = ib_create_qp(pd, &init);
	check(!IS_ERR(qp), "create a kernel RC QP");
	if (IS_ERR(qp))
		return;
	check(qp->qp_num != 0 && init.cap.max_send_wr >= 4, "QP number and queue sizes reported");

	{
		struct ib_qp_init_attr qinit;
		struct ib_qp_attr qattr;

		rc = ib_query_qp(qp, &qattr, IB_QP_STATE, &qinit);
		check(rc == 0 && qattr.qp_state == IB_QPS_INIT,
		      "a new QP reports INIT (iWARP's Idle), as siw and iw_cxgb4 do");
	}
	check(modify_state(qp, IB_QPS_RESET, 0) == 0, "INIT -> RESET");
	rc = ib_post_recv(qp, &rwr[0], &bad_rwr);
	check(rc == -EINVAL, "post_recv in RESET refused (EINVAL)");

	check(modify_state(qp, IB_QPS_INIT, IB_QP_ACCESS_FLAGS | IB_QP_PORT) == 0,
	      "RESET -> INIT");
	for (i = 0; i < 3; i++) {
		rwr[i].wr_id = i + 1;
		rwr[i].sg_list = &sge;
		rwr[i].num_sge = 1;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	check(ib_post_recv(qp, &rwr[0], &bad_rwr) == 0, "post three receives in INIT");

	bad_swr = NULL;
	rc = ib_post_send(qp, &swr, &bad_swr);
	check(rc == -EINVAL && bad_swr == &swr, "post_send before RTS refused, bad_wr set");

	check(ib_poll_cq(cq, 8, wc) == 0, "nothing to poll yet");
	check(ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS) == 0,
	      "arm the CQ: no missed events");

	check(modify_state(qp, IB_QPS_ERR, 0) == 0, "INIT -> ERROR");
	check(atomic_read(&completion_events) == 1, "one completion event for the armed CQ");
	n = ib_poll_cq(cq, 8, wc);
	check(n == 3, "three flushed receives");
	for (i = 0; i < n; i++)
		check(wc[i].wr_id == i + 1 && wc[i].status == IB_WC_WR_FLUSH_ERR &&
		      wc[i].opcode == IB_WC_RECV && wc[i].qp == qp,
		      "flushed receive: wr_id, status, opcode, qp");

	check(ib_post_send(qp, &swr, &bad_swr) == 0, "post_send in ERROR accepted");
	n = ib_poll_cq(cq, 8, wc);
	check(n == 1 && wc[0].wr_id == 100 && wc[0].status == IB_WC_WR_FLUSH_ERR &&
	      wc[0].opcode == IB_WC_SEND && wc[0].qp == qp,
	      "the send is flushed at once");

	swr.sg_list = three;
	swr.num_sge = 3;
	bad_swr = NULL;
	rc = ib_post_send(qp, &swr, &bad_swr);
	check(rc == -EINVAL && bad_swr == &swr, "more SGEs than the QP has refused (EINVAL)");
	check(ib_poll_cq(cq, 8, wc) == 0, "a refused request completes nothing");

	check(ib_destroy_qp(qp) == 0, "destroy the QP");
}

static noinline void run_srq_checks(struct ib_pd *pd, void *buf)
{
	struct ib_srq_init_attr init = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ib_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = pd->local_dma_lkey };
	struct ib_recv_wr wr = { .sg_list = &sge, .num_sge = 1 };
	const struct ib_recv_wr *bad;
	struct ib_srq *srq;
	int i, rc = 0;

	srq = ib_create_srq(pd, &init);
	check(!IS_ERR(srq), "create a kernel SRQ");
	if (IS_ERR(srq))
		return;
	for (i = 0; i < (int)init.attr.max_wr && !rc; i++) {
		wr.wr_id = i;
		rc = ib_post_srq_recv(srq, &wr, &bad);
	}
	check(!rc, "fill the SRQ");
	check(ib_post_srq_recv(srq, &wr, &bad) == -ENOMEM, "one more into a full SRQ (ENOMEM)");
	ib_destroy_srq(srq);
}

static noinline void run_mr_checks(struct ib_pd *pd)
{
	struct ib_mr *mr;

	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 8);
	check(!IS_ERR(mr) && mr->lkey && mr->lkey == mr->rkey, "fast-registration MR of 8 pages");
	if (!IS_ERR(mr))
		check(ib_dereg_mr(mr) == 0, "deregister it");
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1 << 20);
	check(IS_ERR(mr), "a page list beyond max_fast_reg_page_list_len refused");
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
}

static noinline void run_map_checks(struct ib_pd *pd)
{
	struct ib_device *dev = pd->device;
	struct scatterlist sg[9];
	struct ib_mr *mr;
	int i, n, mapped;

	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 8);
	check(!IS_ERR(mr), "fast-registration MR for mapping");
	if (IS_ERR(mr))
		return;
	sg_init_table(sg, ARRAY_SIZE(sg));
	for (i = 0; i < ARRAY_SIZE(sg); i++) {
		struct page *page = alloc_page(GFP_KERNEL);

		if (!page)
			goto out;
		sg_set_page(&sg[i], page, PAGE_SIZE, 0);
	}
	n = ib_dma_map_sg(dev, sg, 2, DMA_BIDIRECTIONAL);
	mapped = ib_map_mr_sg(mr, sg, n, NULL, PAGE_SIZE);
	check(mapped == 2 && mr->length == 2 * PAGE_SIZE &&
	      mr->iova == sg_dma_address(&sg[0]),
	      "map two pages: length and iova set");
	ib_dma_unmap_sg(dev, sg, 2, DMA_BIDIRECTIONAL);
	n = ib_dma_map_sg(dev, sg, ARRAY_SIZE(sg), DMA_BIDIRECTIONAL);
	mapped = ib_map_mr_sg(mr, sg, n, NULL, PAGE_SIZE);
	check(mapped == 8, "a ninth page does not fit a region of eight");
	ib_dma_unmap_sg(dev, sg, ARRAY_SIZE(sg), DMA_BIDIRECTIONAL);
out:
	for (i = 0; i < ARRAY_SIZE(sg); i++)
		if (sg_page(&sg[i]))
			__free_page(sg_page(&sg[i]));
	ib_dereg_mr(mr);
}

static int __init riw_kverbs_test_init(void)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 16 };
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	void *buf;

	dev = ib_device_get_by_name(device, RDMA_DRIVER_UNKNOWN);
	if (!dev) {
		pr_err("riw_kverbs_test: no device %s\n", device);
		return -ENODEV;
	}
	check(dev->kverbs_provider, "the device offers every verb kernel consumers need");

	buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	pd = ib_alloc_pd(dev, 0);
	check(!IS_ERR(pd) && pd->local_dma_lkey, "allocate a PD (with its DMA MR)");
	if (IS_ERR(pd) || !buf)
		goto out;
	cq = ib_create_cq(dev, comp_handler, NULL, NULL, &cq_attr);
	check(!IS_ERR(cq) && cq->cqe >= 16, "create a kernel CQ");
	if (!IS_ERR(cq)) {
		run_qp_checks(pd, cq, buf);
		ib_destroy_cq(cq);
	}
	run_srq_checks(pd, buf);
	run_mr_checks(pd);
	run_map_checks(pd);
	ib_dealloc_pd(pd);
out:
	kfree(buf);
	ib_device_put(dev);
	pr_info("riw_kverbs_test: %d checks, %d failed\n", checks, failures);
	return failures ? -EIO : 0;
}

static void __exit riw_kverbs_test_exit(void)
{
}

module_init(riw_kverbs_test_init);
module_exit(riw_kverbs_test_exit);
MODULE_DESCRIPTION("Kernel verbs checks for riw");
MODULE_LICENSE("GPL");
