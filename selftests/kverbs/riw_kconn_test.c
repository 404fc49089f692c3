// SPDX-License-Identifier: GPL-2.0
/*
 * riw_kconn_test: a kernel consumer's connection over riw, as NVMe-oF and the rdma_rw
 * API use one: rdma_cm in two network namespaces, fast registration (REG_MR) of pages
 * mapped with ib_map_mr_sg, RDMA WRITE into and RDMA READ from such a region (and into
 * one, as an iWARP Read sink), Send with Invalidate, local invalidation, re-registration,
 * and work requests posted from a completion handler running in softirq context.
 *
 * The server side runs in the network namespace of process server_pid, the client side
 * in that of client_pid. Everything runs at load; the module loads only if every check
 * passed. Each check is logged as "riw_kconn_test: ok|not ok N description" for
 * selftests/riw_kconn.sh.
 */
#include <linux/module.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

static int server_pid, client_pid;
module_param(server_pid, int, 0444);
MODULE_PARM_DESC(server_pid, "A process in the server's network namespace");
module_param(client_pid, int, 0444);
MODULE_PARM_DESC(client_pid, "A process in the client's network namespace");
static char *server_addr = "192.0.2.2";
module_param(server_addr, charp, 0444);
MODULE_PARM_DESC(server_addr, "The server's IPv4 address");

#define PORT 7471
#define REGION_PAGES 2
/* The region starts inside its first page: offset and page boundaries both matter. */
#define FIRST_OFFSET 512
#define LEN (REGION_PAGES * PAGE_SIZE - FIRST_OFFSET)
#define CHAIN_WRITES 1000
#define TIMEOUT (20 * HZ)

static int checks, failures;

static void check(bool ok, const char *desc)
{
	checks++;
	if (!ok)
		failures++;
	pr_info("riw_kconn_test: %s %d %s\n", ok ? "ok" : "not ok", checks, desc);
}

/* One end: its CM id and the events seen on it. */
struct side {
	struct rdma_cm_id *id;
	unsigned long seen;
	wait_queue_head_t wq;
	struct ib_pd *pd;
	struct ib_cq *cq;
};

static struct side server, client;
static struct rdma_cm_id *listener;

static int cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct side *s = id->context;

	/* An error event is what a failed check would not show: name it in the log. */
	if (ev->status)
		pr_info("riw_kconn_test: # %s: %s, status %d\n", s == &server ? "server" : "client",
			rdma_event_msg(ev->event), ev->status);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		s->id = id;
	if (ev->event < BITS_PER_LONG)
		set_bit(ev->event, &s->seen);
	wake_up(&s->wq);
	return 0;
}

static bool wait_cm(struct side *s, enum rdma_cm_event_type ev)
{
	return wait_event_timeout(s->wq, test_bit(ev, &s->seen), TIMEOUT) > 0;
}

/* A client completion, delivered by the CQ's handler in softirq context. */
struct client_wait {
	struct ib_cqe cqe;
	struct completion done;
	enum ib_wc_status status;
	enum ib_wc_opcode opcode;
};

static void client_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct client_wait *w = container_of(wc->wr_cqe, struct client_wait, cqe);

	w->status = wc->status;
	w->opcode = wc->opcode;
	complete(&w->done);
}

static void client_wait_init(struct client_wait *w)
{
	w->cqe.done = client_done;
	init_completion(&w->done);
	w->status = IB_WC_GENERAL_ERR;
}

static bool client_finished(struct client_wait *w, enum ib_wc_opcode opcode)
{
	return wait_for_completion_timeout(&w->done, TIMEOUT) && w->status == IB_WC_SUCCESS &&
	       w->opcode == opcode;
}

/* The server polls its CQ itself. */
static bool server_poll(struct ib_wc *wc)
{
	unsigned long end = jiffies + TIMEOUT;

	while (time_before(jiffies, end)) {
		if (ib_poll_cq(server.cq, 1, wc) == 1)
			return true;
		msleep(1);
	}
	return false;
}

static bool server_finished(u64 wr_id, enum ib_wc_opcode opcode)
{
	struct ib_wc wc;

	return server_poll(&wc) && wc.wr_id == wr_id && wc.status == IB_WC_SUCCESS &&
	       wc.opcode == opcode;
}

/* Maps `pages` into `mr`, the first at FIRST_OFFSET, LEN bytes in all. */
static bool map_region(struct ib_device *dev, struct ib_mr *mr, struct page **pages,
		       struct scatterlist *sg)
{
	int i;

	sg_init_table(sg, REGION_PAGES);
	for (i = 0; i < REGION_PAGES; i++)
		sg_set_page(&sg[i], pages[i], i ? PAGE_SIZE : PAGE_SIZE - FIRST_OFFSET,
			    i ? 0 : FIRST_OFFSET);
	if (ib_dma_map_sg(dev, sg, REGION_PAGES, DMA_BIDIRECTIONAL) != REGION_PAGES)
		return false;
	return ib_map_mr_sg(mr, sg, REGION_PAGES, NULL, PAGE_SIZE) == REGION_PAGES &&
	       mr->length == LEN;
}

static int post_reg(struct ib_qp *qp, struct ib_mr *mr, int access, u64 wr_id,
		    struct ib_cqe *cqe)
{
	struct ib_reg_wr wr = {
		.wr = { .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = mr,
		.access = access,
	};
	const struct ib_send_wr *bad;

	if (cqe)
		wr.wr.wr_cqe = cqe;
	else
		wr.wr.wr_id = wr_id;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	wr.key = mr->rkey;
	return ib_post_send(qp, &wr.wr, &bad);
}

static int post_rdma(struct ib_qp *qp, enum ib_wr_opcode opcode, struct ib_sge *sge,
		     u64 raddr, u32 rkey, struct ib_cqe *cqe)
{
	struct ib_rdma_wr wr = {
		.wr = { .opcode = opcode, .send_flags = IB_SEND_SIGNALED, .sg_list = sge,
			.num_sge = 1, .wr_cqe = cqe },
		.remote_addr = raddr,
		.rkey = rkey,
	};
	const struct ib_send_wr *bad;

	return ib_post_send(qp, &wr.wr, &bad);
}

/* Whether the region's pages hold `expect`. */
static bool pages_hold(struct page **pages, const u8 *expect)
{
	return !memcmp(page_address(pages[0]) + FIRST_OFFSET, expect, PAGE_SIZE - FIRST_OFFSET) &&
	       !memcmp(page_address(pages[1]), expect + PAGE_SIZE - FIRST_OFFSET, PAGE_SIZE);
}

/*
 * An RDMA WRITE completes once sent: the peer places it a little later. Whether the
 * region's pages come to hold `expect`.
 */
static bool pages_come_to_hold(struct page **pages, const u8 *expect)
{
	unsigned long end = jiffies + TIMEOUT;

	while (!pages_hold(pages, expect)) {
		if (time_after(jiffies, end))
			return false;
		msleep(1);
	}
	return true;
}

static bool first_bytes_come_to_hold(struct page *page, const u8 *expect)
{
	unsigned long end = jiffies + TIMEOUT;

	while (memcmp(page_address(page) + FIRST_OFFSET, expect, 64)) {
		if (time_after(jiffies, end))
			return false;
		msleep(1);
	}
	return true;
}

/* RDMA WRITEs each posted by the previous one's completion handler (softirq). */
static struct chain {
	struct ib_cqe cqe;
	struct ib_qp *qp;
	struct ib_sge sge;
	u64 raddr;
	u32 rkey;
	int left;
	bool failed;
	struct completion done;
} chain;

static void chain_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS) {
		chain.failed = true;
		complete(&chain.done);
		return;
	}
	if (--chain.left == 0) {
		complete(&chain.done);
		return;
	}
	if (post_rdma(chain.qp, IB_WR_RDMA_WRITE, &chain.sge, chain.raddr, chain.rkey,
		      &chain.cqe)) {
		chain.failed = true;
		complete(&chain.done);
	}
}

static struct ib_qp *make_qp(struct side *s)
{
	struct ib_qp_init_attr attr = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
	};

	if (rdma_create_qp(s->id, s->pd, &attr))
		return NULL;
	return s->id->qp;
}

static void destroy_qps(void)
{
	if (client.id && client.id->qp)
		rdma_destroy_qp(client.id);
	if (server.id && server.id->qp)
		rdma_destroy_qp(server.id);
}

static struct page *spages[REGION_PAGES], *cpages[REGION_PAGES];
static struct scatterlist ssg[REGION_PAGES], csg[REGION_PAGES];

static noinline void run_data_checks(struct ib_device *sdev, struct ib_device *cdev)
{
	struct ib_qp *sqp = server.id->qp, *cqp = client.id->qp;
	struct ib_mr *smr = NULL, *cmr = NULL;
	u8 *pattern = NULL, *msg = NULL, *small = NULL;
	u64 pattern_dma = 0, msg_dma = 0, small_dma = 0;
	/* Static: a completion that came after its wait timed out must still land. */
	static struct client_wait w, r;
	struct ib_sge sge;
	struct ib_wc wc;
	const struct ib_send_wr *bad;
	const struct ib_recv_wr *rbad;
	bool smapped = false, cmapped = false;
	int i, access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;

	for (i = 0; i < REGION_PAGES; i++) {
		spages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		cpages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
	}
	pattern = kmalloc(LEN, GFP_KERNEL);
	msg = kzalloc(64, GFP_KERNEL);
	small = kzalloc(64, GFP_KERNEL);
	smr = ib_alloc_mr(server.pd, IB_MR_TYPE_MEM_REG, REGION_PAGES);
	cmr = ib_alloc_mr(client.pd, IB_MR_TYPE_MEM_REG, REGION_PAGES);
	check(spages[0] && spages[1] && cpages[0] && cpages[1] && pattern && msg && small &&
	      !IS_ERR(smr) && !IS_ERR(cmr), "fast-registration MRs and buffers allocated");
	if (!spages[0] || !spages[1] || !cpages[0] || !cpages[1] || !pattern || !msg ||
	    !small || IS_ERR(smr) || IS_ERR(cmr))
		goto out;
	get_random_bytes(pattern, LEN);
	pattern_dma = ib_dma_map_single(cdev, pattern, LEN, DMA_BIDIRECTIONAL);
	msg_dma = ib_dma_map_single(cdev, msg, 64, DMA_BIDIRECTIONAL);
	small_dma = ib_dma_map_single(sdev, small, 64, DMA_BIDIRECTIONAL);

	smapped = map_region(sdev, smr, spages, ssg);
	cmapped = map_region(cdev, cmr, cpages, csg);
	check(smapped && cmapped, "ib_map_mr_sg maps two pages, the first at an offset");
	if (!smapped || !cmapped)
		goto out;

	check(!post_reg(sqp, smr, access, 1, NULL) && server_finished(1, IB_WC_REG_MR),
	      "REG_MR completes (server)");

	client_wait_init(&w);
	sge = (struct ib_sge){ .addr = pattern_dma, .length = LEN,
			       .lkey = client.pd->local_dma_lkey };
	check(!post_rdma(cqp, IB_WR_RDMA_WRITE, &sge, smr->iova, smr->rkey, &w.cqe) &&
	      client_finished(&w, IB_WC_RDMA_WRITE) && pages_come_to_hold(spages, pattern),
	      "RDMA WRITE across the pages of a fast-registered region");

	client_wait_init(&w);
	check(!post_reg(cqp, cmr, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE, 0, &w.cqe) &&
	      client_finished(&w, IB_WC_REG_MR), "REG_MR completes (client, softirq CQ)");

	client_wait_init(&w);
	sge = (struct ib_sge){ .addr = cmr->iova, .length = LEN, .lkey = cmr->lkey };
	check(!post_rdma(cqp, IB_WR_RDMA_READ, &sge, smr->iova, smr->rkey, &w.cqe) &&
	      client_finished(&w, IB_WC_RDMA_READ) && pages_hold(cpages, pattern),
	      "RDMA READ from a fast-registered region into one (the Read sink)");

	/*
	 * RDMA READ with invalidate, as the rdma_rw API reads on iWARP: the sink's region must
	 * be the one invalidated, and is invalid once the Read completes.
	 */
	{
		struct ib_rdma_wr rwr = {
			.wr = { .opcode = IB_WR_RDMA_READ_WITH_INV, .send_flags = IB_SEND_SIGNALED,
				.sg_list = &sge, .num_sge = 1,
				.ex.invalidate_rkey = client.pd->local_dma_lkey },
			.remote_addr = smr->iova,
			.rkey = smr->rkey,
		};

		check(ib_post_send(cqp, &rwr.wr, &bad) == -EINVAL && bad == &rwr.wr,
		      "RDMA READ with invalidate of another region than its sink refused (EINVAL)");
		memset(page_address(cpages[0]), 0, PAGE_SIZE);
		memset(page_address(cpages[1]), 0, PAGE_SIZE);
		client_wait_init(&w);
		rwr.wr.wr_cqe = &w.cqe;
		/* Another key: rdma_rw names the sink with its key from before it updated it. */
		rwr.wr.ex.invalidate_rkey = cmr->lkey ^ 1;
		check(!ib_post_send(cqp, &rwr.wr, &bad) && client_finished(&w, IB_WC_RDMA_READ) &&
		      pages_hold(cpages, pattern),
		      "RDMA READ with invalidate into a fast-registered sink");
	}
	client_wait_init(&w);
	check(!post_reg(cqp, cmr, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE, 0, &w.cqe) &&
	      client_finished(&w, IB_WC_REG_MR),
	      "the Read invalidated its sink: it registers again without LOCAL_INV");

	/* Send with Invalidate: the server's region becomes invalid. */
	sge = (struct ib_sge){ .addr = small_dma, .length = 64, .lkey = server.pd->local_dma_lkey };
	{
		struct ib_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 };

		check(!ib_post_recv(sqp, &rwr, &rbad), "post a receive (server)");
	}
	client_wait_init(&w);
	{
		struct ib_sge csge = { .addr = msg_dma, .length = 16,
				       .lkey = client.pd->local_dma_lkey };
		struct ib_send_wr swr = { .opcode = IB_WR_SEND_WITH_INV, .wr_cqe = &w.cqe,
					  .send_flags = IB_SEND_SIGNALED, .sg_list = &csge,
					  .num_sge = 1, .ex.invalidate_rkey = smr->rkey };

		check(!ib_post_send(cqp, &swr, &bad) && client_finished(&w, IB_WC_SEND),
		      "Send with Invalidate completes (client)");
	}
	memset(&wc, 0, sizeof(wc));
	check(server_poll(&wc) && wc.wr_id == 2 && wc.status == IB_WC_SUCCESS &&
	      wc.opcode == IB_WC_RECV && wc.byte_len == 16 &&
	      (wc.wc_flags & IB_WC_WITH_INVALIDATE) && wc.ex.invalidate_rkey == smr->rkey,
	      "the receive reports the STag the peer invalidated");

	/* An invalidated region registers again, under a new key. */
	check(!post_reg(sqp, smr, access, 3, NULL) && server_finished(3, IB_WC_REG_MR),
	      "REG_MR of a remotely invalidated region, new key");

	memset(page_address(spages[0]), 0, PAGE_SIZE);
	memset(page_address(spages[1]), 0, PAGE_SIZE);
	chain.qp = cqp;
	chain.sge = (struct ib_sge){ .addr = pattern_dma, .length = 64,
				     .lkey = client.pd->local_dma_lkey };
	chain.raddr = smr->iova;
	chain.rkey = smr->rkey;
	chain.left = CHAIN_WRITES;
	chain.failed = false;
	chain.cqe.done = chain_done;
	init_completion(&chain.done);
	check(!post_rdma(cqp, IB_WR_RDMA_WRITE, &chain.sge, chain.raddr, chain.rkey,
			 &chain.cqe) &&
	      wait_for_completion_timeout(&chain.done, 6 * TIMEOUT) && !chain.failed &&
	      first_bytes_come_to_hold(spages[0], pattern),
	      "1000 RDMA WRITEs, each posted from the last one's completion handler (softirq)");

	{
		struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV, .wr_id = 4,
					  .send_flags = IB_SEND_SIGNALED,
					  .ex.invalidate_rkey = smr->rkey };

		check(!ib_post_send(sqp, &inv, &bad) && server_finished(4, IB_WC_LOCAL_INV),
		      "LOCAL_INV completes (server)");
	}

	/*
	 * A Write completes once sent; the peer's Terminate then ends the connection, and
	 * the Read behind the Write is flushed.
	 */
	client_wait_init(&w);
	{
		client_wait_init(&r);
		sge = (struct ib_sge){ .addr = pattern_dma, .length = 64,
				       .lkey = client.pd->local_dma_lkey };
		post_rdma(cqp, IB_WR_RDMA_WRITE, &sge, smr->iova, smr->rkey, &w.cqe);
		sge.addr = pattern_dma + 64;
		post_rdma(cqp, IB_WR_RDMA_READ, &sge, smr->iova, smr->rkey, &r.cqe);
		check(wait_for_completion_timeout(&w.done, TIMEOUT) &&
		      wait_for_completion_timeout(&r.done, TIMEOUT) && r.status != IB_WC_SUCCESS,
		      "after LOCAL_INV the STag is refused: the connection ends, the Read behind is flushed");
	}
	check(wait_cm(&client, RDMA_CM_EVENT_DISCONNECTED) &&
	      wait_cm(&server, RDMA_CM_EVENT_DISCONNECTED), "both ends see the disconnect");
	memset(page_address(spages[0]), 0, PAGE_SIZE);
out:
	if (smapped)
		ib_dma_unmap_sg(sdev, ssg, REGION_PAGES, DMA_BIDIRECTIONAL);
	if (cmapped)
		ib_dma_unmap_sg(cdev, csg, REGION_PAGES, DMA_BIDIRECTIONAL);
	if (pattern_dma)
		ib_dma_unmap_single(cdev, pattern_dma, LEN, DMA_BIDIRECTIONAL);
	if (msg_dma)
		ib_dma_unmap_single(cdev, msg_dma, 64, DMA_BIDIRECTIONAL);
	if (small_dma)
		ib_dma_unmap_single(sdev, small_dma, 64, DMA_BIDIRECTIONAL);
	/* The QPs go first: nothing may still use the regions' pages. */
	destroy_qps();
	if (!IS_ERR_OR_NULL(smr))
		ib_dereg_mr(smr);
	if (!IS_ERR_OR_NULL(cmr))
		ib_dereg_mr(cmr);
	for (i = 0; i < REGION_PAGES; i++) {
		if (spages[i])
			__free_page(spages[i]);
		if (cpages[i])
			__free_page(cpages[i]);
	}
	kfree(pattern);
	kfree(msg);
	kfree(small);
}

static int __init riw_kconn_test_init(void)
{
	struct rdma_conn_param param = { .initiator_depth = 4, .responder_resources = 4 };
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct net *snet = NULL, *cnet = NULL;
	struct rdma_cm_id *cid = NULL;
	bool connected = false;
	int ret;

	init_waitqueue_head(&server.wq);
	init_waitqueue_head(&client.wq);
	if (!in4_pton(server_addr, -1, (u8 *)&addr.sin_addr.s_addr, -1, NULL))
		return -EINVAL;
	snet = get_net_ns_by_pid(server_pid);
	cnet = get_net_ns_by_pid(client_pid);
	check(!IS_ERR(snet) && !IS_ERR(cnet), "the server's and the client's namespaces");
	if (IS_ERR(snet) || IS_ERR(cnet))
		goto out_nets;

	listener = rdma_create_id(snet, cm_handler, &server, RDMA_PS_TCP, IB_QPT_RC);
	check(!IS_ERR(listener) && !rdma_bind_addr(listener, (struct sockaddr *)&addr) &&
	      !rdma_listen(listener, 4), "listen (server namespace)");
	if (IS_ERR(listener))
		goto out_nets;

	cid = rdma_create_id(cnet, cm_handler, &client, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(cid))
		goto out_listener;
	client.id = cid;
	ret = rdma_resolve_addr(cid, NULL, (struct sockaddr *)&addr, 5000);
	if (ret)
		pr_info("riw_kconn_test: # rdma_resolve_addr: %d\n", ret);
	check(!ret &&
	      wait_cm(&client, RDMA_CM_EVENT_ADDR_RESOLVED) && !rdma_resolve_route(cid, 5000) &&
	      wait_cm(&client, RDMA_CM_EVENT_ROUTE_RESOLVED), "resolve the server (client namespace)");
	if (!test_bit(RDMA_CM_EVENT_ROUTE_RESOLVED, &client.seen))
		goto out_client;
	check(!strncmp(dev_name(&cid->device->dev), "riw", 3), "the route is a riw device");

	client.pd = ib_alloc_pd(cid->device, 0);
	client.cq = ib_alloc_cq(cid->device, NULL, 64, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(client.pd) || IS_ERR(client.cq) || !make_qp(&client))
		goto out_client;
	check(!rdma_connect(cid, &param) && wait_cm(&server, RDMA_CM_EVENT_CONNECT_REQUEST),
	      "the server gets the connection request");
	if (!server.id)
		goto out_client;
	server.pd = ib_alloc_pd(server.id->device, 0);
	server.cq = ib_alloc_cq(server.id->device, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(server.pd) || IS_ERR(server.cq) || !make_qp(&server))
		goto out_server;
	/* Outside its event handler, a consumer accepts under the id's handler lock. */
	rdma_lock_handler(server.id);
	connected = !rdma_accept(server.id, &param);
	rdma_unlock_handler(server.id);
	connected = connected && wait_cm(&client, RDMA_CM_EVENT_ESTABLISHED) &&
		    wait_cm(&server, RDMA_CM_EVENT_ESTABLISHED);
	check(connected, "connected: a kernel consumer's QPs over riw (rdma_cm)");
	if (connected)
		run_data_checks(server.id->device, cid->device);
out_server:
	destroy_qps();
	rdma_disconnect(cid);
	rdma_disconnect(server.id);
	if (!IS_ERR_OR_NULL(server.cq))
		ib_free_cq(server.cq);
	if (!IS_ERR_OR_NULL(server.pd))
		ib_dealloc_pd(server.pd);
	if (server.id) {
		rdma_destroy_id(server.id);
		server.id = NULL;
	}
out_client:
	destroy_qps();
	if (!IS_ERR_OR_NULL(client.cq))
		ib_free_cq(client.cq);
	if (!IS_ERR_OR_NULL(client.pd))
		ib_dealloc_pd(client.pd);
	rdma_destroy_id(cid);
out_listener:
	rdma_destroy_id(listener);
out_nets:
	if (!IS_ERR_OR_NULL(snet))
		put_net(snet);
	if (!IS_ERR_OR_NULL(cnet))
		put_net(cnet);
	pr_info("riw_kconn_test: %d checks, %d failed\n", checks, failures);
	return failures || checks < 20 ? -EIO : 0;
}

static void __exit riw_kconn_test_exit(void)
{
}

module_init(riw_kconn_test_init);
module_exit(riw_kconn_test_exit);
MODULE_DESCRIPTION("riw selftest: a kernel consumer's connection, fast registration and invalidation");
MODULE_LICENSE("GPL");
