// SPDX-License-Identifier: GPL-2.0
/*
 * The part of riw_verbs.sh that needs C: what libibverbs and pyverbs do not let an application
 * do on purpose. Runs against any soft-iWARP ABI device (riw or siw) through the stock provider.
 *
 *   verbs_raw --list            the subtest names, one a line
 *   verbs_raw DEVICE [NAME...]  run the subtests (all without NAME)
 *
 * Prints one line "RESULT pass|fail|xfail|skip NAME [reason]" per subtest, everything else is
 * diagnostics. Exit status 0 when the run completed (the results say how it went).
 *
 * How the rings are found. The provider maps each ring with mmap(cmd_fd, key) right after the
 * create command and keeps the pointer in its private struct siw_qp/siw_cq/siw_srq, whose
 * layout is rdma-core's business. Instead of relying on it, this program diffs the mappings of
 * /dev/infiniband/uverbs* in /proc/self/maps around each ibv_create_*: the new ones are the
 * object's rings, and their file offset is the mmap key the kernel handed out. The SQ and RQ of
 * a QP are told apart by their size (the test sizes them differently) and the identification
 * is checked against the provider's own writes (a posted receive shows up in the RQ found).
 * The doorbell is the provider's: a POST_SEND write command carrying zero work requests.
 * Unknown handles go the same way, as raw write commands on cmd_fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/siw-abi.h>

enum result { PASS, FAIL, XFAIL, SKIP };
static const char *result_name[] = { "pass", "fail", "xfail", "skip" };

static struct ibv_context *ctx;
static const char *driver = "riw";
static char reason[256];
static bool failed;

static void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* A failed check: note it, keep going so that the diagnostics show every deviation. */
#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			printf("FAIL %s:%d: ", __func__, __LINE__);      \
			diag(__VA_ARGS__);                                \
			failed = true;                                    \
		}                                                         \
	} while (0)

#define REQUIRE(cond, ...)                                                \
	do {                                                              \
		if (!(cond)) {                                            \
			printf("FAIL %s:%d: ", __func__, __LINE__);      \
			diag(__VA_ARGS__);                                \
			return FAIL;                                      \
		}                                                         \
	} while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill_random(void *p, size_t len)
{
	uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		b[i] = rnd();
}

/* ---- raw uverbs write commands ---- */

/* Send one legacy write command; returns 0 or the errno. */
static int raw_cmd(uint32_t cmd, const void *body, size_t len, size_t out_len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		uint8_t body[512];
	} req = {};
	ssize_t n;

	req.hdr.command = cmd;
	req.hdr.in_words = (sizeof(req.hdr) + len) / 4;
	req.hdr.out_words = out_len / 4;
	memcpy(req.body, body, len);
	n = write(ctx->cmd_fd, &req, sizeof(req.hdr) + len);
	if (n == (ssize_t)(sizeof(req.hdr) + len))
		return 0;
	return n < 0 ? errno : EIO;
}

static uint64_t resp_buf[64];

static int doorbell(uint32_t qp_handle)
{
	struct ib_uverbs_post_send cmd = {
		.response = (uintptr_t)resp_buf,
		.qp_handle = qp_handle,
		.wqe_size = sizeof(struct ibv_send_wr),
	};
	return raw_cmd(IB_USER_VERBS_CMD_POST_SEND, &cmd, sizeof(cmd),
		       sizeof(struct ib_uverbs_post_send_resp));
}

/* QUERY_SRQ: the provider has no query_srq, so the kernel's is reached this way only. */
static int raw_query_srq(uint32_t h, struct ib_uverbs_query_srq_resp *resp)
{
	struct ib_uverbs_query_srq cmd = { .response = (uintptr_t)resp, .srq_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_QUERY_SRQ, &cmd, sizeof(cmd), sizeof(*resp));
}

static int raw_query_qp(uint32_t qp_handle)
{
	struct ib_uverbs_query_qp cmd = {
		.response = (uintptr_t)resp_buf,
		.qp_handle = qp_handle,
		.attr_mask = IBV_QP_STATE,
	};
	return raw_cmd(IB_USER_VERBS_CMD_QUERY_QP, &cmd, sizeof(cmd),
		       sizeof(struct ib_uverbs_query_qp_resp));
}

static int raw_modify_qp(uint32_t qp_handle)
{
	struct ib_uverbs_modify_qp cmd = {
		.qp_handle = qp_handle,
		.attr_mask = IBV_QP_STATE,
		.qp_state = IBV_QPS_ERR,
	};
	return raw_cmd(IB_USER_VERBS_CMD_MODIFY_QP, &cmd, sizeof(cmd), 0);
}

static int raw_destroy_qp(uint32_t h)
{
	struct ib_uverbs_destroy_qp cmd = { .response = (uintptr_t)resp_buf, .qp_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_DESTROY_QP, &cmd, sizeof(cmd),
		       sizeof(struct ib_uverbs_destroy_qp_resp));
}

static int raw_destroy_cq(uint32_t h)
{
	struct ib_uverbs_destroy_cq cmd = { .response = (uintptr_t)resp_buf, .cq_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_DESTROY_CQ, &cmd, sizeof(cmd),
		       sizeof(struct ib_uverbs_destroy_cq_resp));
}

static int raw_destroy_srq(uint32_t h)
{
	struct ib_uverbs_destroy_srq cmd = { .response = (uintptr_t)resp_buf, .srq_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_DESTROY_SRQ, &cmd, sizeof(cmd),
		       sizeof(struct ib_uverbs_destroy_srq_resp));
}

static int raw_dealloc_pd(uint32_t h)
{
	struct ib_uverbs_dealloc_pd cmd = { .pd_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_DEALLOC_PD, &cmd, sizeof(cmd), 0);
}

static int raw_dereg_mr(uint32_t h)
{
	struct ib_uverbs_dereg_mr cmd = { .mr_handle = h };

	return raw_cmd(IB_USER_VERBS_CMD_DEREG_MR, &cmd, sizeof(cmd), 0);
}

/* ---- ring discovery ---- */

struct mapping {
	uintptr_t start, end;
	uint64_t key;
};

#define MAX_MAPS 64

static int uverbs_maps(struct mapping *m, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], path[256];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;
		char perms[8];

		path[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &start, &end, perms, &off,
			   path) < 4)
			continue;
		if (strncmp(path, "/dev/infiniband/uverbs", 22) || n == max)
			continue;
		m[n].start = start;
		m[n].end = end;
		m[n].key = off;
		n++;
	}
	fclose(f);
	return n;
}

struct maps_snapshot {
	struct mapping m[MAX_MAPS];
	int n;
};

static void snapshot(struct maps_snapshot *s)
{
	s->n = uverbs_maps(s->m, MAX_MAPS);
}

/* The mappings present now and not in BEFORE; returns how many. */
static int new_maps(const struct maps_snapshot *before, struct mapping *out, int max)
{
	struct maps_snapshot now;
	int n = 0;

	snapshot(&now);
	for (int i = 0; i < now.n; i++) {
		bool old = false;

		for (int j = 0; j < before->n; j++)
			old |= now.m[i].start == before->m[j].start && now.m[i].key == before->m[j].key;
		if (!old && n < max)
			out[n++] = now.m[i];
	}
	return n;
}

static size_t page_round(size_t n)
{
	size_t p = sysconf(_SC_PAGESIZE);

	return (n + p - 1) / p * p;
}

/* ---- objects ---- */

struct qp_rings {
	struct ibv_qp *qp;
	struct siw_sqe *sq;
	struct siw_rqe *rq;
	size_t sq_len, rq_len;
	uint64_t sq_key, rq_key;
};

struct cq_ring {
	struct ibv_cq *cq;
	struct siw_cqe *q;
	size_t len;
	uint64_t key;
};

static struct ibv_pd *pd;

static int make_cq(struct cq_ring *c, int cqe)
{
	struct maps_snapshot s;
	struct mapping m[4];
	int n;

	snapshot(&s);
	c->cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	if (!c->cq) {
		diag("ibv_create_cq(%d): %s", cqe, strerror(errno));
		return -1;
	}
	n = new_maps(&s, m, 4);
	if (n != 1) {
		diag("ibv_create_cq added %d uverbs mappings, expected 1 (the CQ ring)", n);
		return -1;
	}
	c->q = (void *)m[0].start;
	c->len = m[0].end - m[0].start;
	c->key = m[0].key;
	return 0;
}

/* A QP with an SQ of SQ_WR and an RQ of RQ_WR (or on SRQ); sizes must differ in pages. */
static int make_qp(struct qp_rings *r, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
		   int sq_wr, int rq_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = srq,
		.cap = { .max_send_wr = sq_wr, .max_recv_wr = srq ? 0 : rq_wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct maps_snapshot s;
	struct mapping m[4];
	int n;

	memset(r, 0, sizeof(*r));
	snapshot(&s);
	r->qp = ibv_create_qp(pd, &a);
	if (!r->qp) {
		diag("ibv_create_qp: %s", strerror(errno));
		return -1;
	}
	n = new_maps(&s, m, 4);
	if (n != (srq ? 1 : 2)) {
		diag("ibv_create_qp added %d uverbs mappings, expected %d", n, srq ? 1 : 2);
		return -1;
	}
	/* The send ring is the larger one: callers size SQ_WR 120-byte SQEs to more pages than
	 * RQ_WR 112-byte RQEs where they need to tell the two apart. */
	if (n == 2 && m[1].end - m[1].start > m[0].end - m[0].start) {
		struct mapping t = m[0];

		m[0] = m[1];
		m[1] = t;
	}
	r->sq = (void *)m[0].start;
	r->sq_len = m[0].end - m[0].start;
	r->sq_key = m[0].key;
	if (n == 2) {
		r->rq = (void *)m[1].start;
		r->rq_len = m[1].end - m[1].start;
		r->rq_key = m[1].key;
	}
	return 0;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = { .qp_state = st };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		return -1;
	return a.qp_state;
}

static char recv_buf[4096];
static struct ibv_mr *recv_mr;

static int post_recvs(struct ibv_qp *qp, uint64_t first_id, int n)
{
	if (!recv_mr)
		return -1;
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)recv_buf, 64, recv_mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = first_id + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int rc = ibv_post_recv(qp, &wr, &bad);

		if (rc) {
			diag("ibv_post_recv: %s", strerror(rc));
			return -1;
		}
	}
	return 0;
}

/* Poll everything there is, after giving the kernel a moment; returns the count. */
static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int n = 0, got;

	usleep(200 * 1000);
	while (n < max && (got = ibv_poll_cq(cq, max - n, wc + n)) > 0)
		n += got;
	return n;
}

/* Wait up to MS for an async event; returns 0 and fills EV, or -1. */
static int async_event(struct ibv_async_event *ev, int ms)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	int fl = fcntl(ctx->async_fd, F_GETFL);

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	if (poll(&p, 1, ms) != 1)
		return -1;
	if (ibv_get_async_event(ctx, ev))
		return -1;
	return 0;
}

/* ---- subtests ---- */

/* Destroying a CQ, SRQ or PD that a QP still uses fails with EBUSY and harms nothing. */
static enum result t_busy(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .srq = srq,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp;
	int rc;

	REQUIRE(cq && srq && pd2, "create cq/srq/pd: %s", strerror(errno));
	qp = ibv_create_qp(pd2, &a);
	REQUIRE(qp, "ibv_create_qp on an SRQ: %s", strerror(errno));

	rc = ibv_destroy_cq(cq);
	CHECK(rc == EBUSY, "destroy CQ in use by a QP: %s, want EBUSY", strerror(rc));
	rc = ibv_destroy_srq(srq);
	CHECK(rc == EBUSY, "destroy SRQ in use by a QP: %s, want EBUSY", strerror(rc));
	rc = ibv_dealloc_pd(pd2);
	CHECK(rc == EBUSY, "dealloc PD in use by a QP: %s, want EBUSY", strerror(rc));
	CHECK(qp_state(qp) >= 0, "the QP is still there after the refused destroys");

	rc = ibv_destroy_qp(qp);
	CHECK(rc == 0, "destroy QP: %s", strerror(rc));
	/* The provider unmapped the CQ ring before the refused destroy; the kernel object lives. */
	rc = ibv_destroy_cq(cq);
	CHECK(rc == 0, "destroy the CQ once unused: %s", strerror(rc));
	rc = ibv_destroy_srq(srq);
	CHECK(rc == 0, "destroy the SRQ once unused: %s", strerror(rc));
	rc = ibv_dealloc_pd(pd2);
	CHECK(rc == 0, "dealloc the PD once unused: %s", strerror(rc));
	return PASS;
}

static bool unknown_errno(int rc)
{
	return rc == EINVAL || rc == ENOENT;
}

/* Unknown, stale and wrong-type handles in every command that takes one. */
static enum result t_handles(void)
{
	struct cq_ring c;
	struct qp_rings q;
	struct ibv_mr *mr;
	struct ibv_pd *pd2;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq;
	uint32_t bogus[] = { 0x7fffffff, 0xffffffff, 12345 };
	uint32_t qph, cqh, pdh, mrh, srqh;
	int rc;

	REQUIRE(make_cq(&c, 8) == 0, "cq");
	REQUIRE(make_qp(&q, c.cq, c.cq, NULL, 32, 4) == 0, "qp");
	pd2 = ibv_alloc_pd(ctx);
	mr = ibv_reg_mr(pd, recv_buf, sizeof(recv_buf), IBV_ACCESS_LOCAL_WRITE);
	srq = ibv_create_srq(pd, &sa);
	REQUIRE(pd2 && mr && srq, "pd/mr/srq: %s", strerror(errno));

	for (unsigned i = 0; i < sizeof(bogus) / sizeof(bogus[0]); i++) {
		uint32_t h = bogus[i];

		diag("handle %#x", h);
		CHECK(unknown_errno(rc = raw_query_qp(h)), "query_qp: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_modify_qp(h)), "modify_qp: %s", strerror(rc));
		CHECK(unknown_errno(rc = doorbell(h)), "post_send doorbell: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_destroy_qp(h)), "destroy_qp: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_destroy_cq(h)), "destroy_cq: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_destroy_srq(h)), "destroy_srq: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_dealloc_pd(h)), "dealloc_pd: %s", strerror(rc));
		CHECK(unknown_errno(rc = raw_dereg_mr(h)), "dereg_mr: %s", strerror(rc));
	}

	/* A handle of another type. */
	cqh = c.cq->handle;
	qph = q.qp->handle;
	CHECK(unknown_errno(rc = raw_query_qp(cqh)), "query_qp with a CQ handle: %s", strerror(rc));
	CHECK(unknown_errno(rc = doorbell(cqh)), "doorbell with a CQ handle: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_destroy_cq(qph)), "destroy_cq with a QP handle: %s",
	      strerror(rc));
	CHECK(unknown_errno(rc = raw_dealloc_pd(mr->handle)), "dealloc_pd with an MR handle: %s",
	      strerror(rc));
	CHECK(qp_state(q.qp) >= 0 && ibv_poll_cq(c.cq, 1, &(struct ibv_wc){}) == 0,
	      "the objects whose handles were misused still work");

	/* Stale handles: the objects destroyed (with the raw commands, so the library's own
	 * bookkeeping of the ibv_ objects is simply leaked, not reused). */
	pdh = pd2->handle;
	mrh = mr->handle;
	srqh = srq->handle;
	CHECK((rc = raw_destroy_qp(qph)) == 0, "raw destroy_qp: %s", strerror(rc));
	CHECK((rc = raw_destroy_cq(cqh)) == 0, "raw destroy_cq: %s", strerror(rc));
	CHECK((rc = raw_destroy_srq(srqh)) == 0, "raw destroy_srq: %s", strerror(rc));
	CHECK((rc = raw_dereg_mr(mrh)) == 0, "raw dereg_mr: %s", strerror(rc));
	CHECK((rc = raw_dealloc_pd(pdh)) == 0, "raw dealloc_pd: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_query_qp(qph)), "query_qp, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = doorbell(qph)), "doorbell, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_destroy_qp(qph)), "destroy_qp, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_destroy_cq(cqh)), "destroy_cq, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_destroy_srq(srqh)), "destroy_srq, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_dereg_mr(mrh)), "dereg_mr, stale: %s", strerror(rc));
	CHECK(unknown_errno(rc = raw_dealloc_pd(pdh)), "dealloc_pd, stale: %s", strerror(rc));
	/* The provider still has the rings mapped; they stay harmless memory. */
	memset(q.sq, 0xa5, q.sq_len);
	memset(c.q, 0xa5, c.len);
	munmap(q.sq, q.sq_len);
	munmap(q.rq, q.rq_len);
	munmap(c.q, c.len);
	return PASS;
}

/* The rings: found, mapped twice, refused when the key, size or offset is wrong. */
static enum result t_mmap(void)
{
	struct cq_ring c;
	struct qp_rings q;
	size_t pg = sysconf(_SC_PAGESIZE);
	void *p, *sq2, *rq2;
	int rc;

	REQUIRE(make_cq(&c, 16) == 0, "cq");
	REQUIRE(make_qp(&q, c.cq, c.cq, NULL, 64, 4) == 0, "qp");
	diag("SQ ring %zu bytes key %#" PRIx64 ", RQ ring %zu bytes key %#" PRIx64
	     ", CQ ring %zu bytes key %#" PRIx64,
	     q.sq_len, q.sq_key, q.rq_len, q.rq_key, c.len, c.key);
	CHECK(q.sq_len >= page_round(64 * sizeof(struct siw_sqe)), "SQ ring too small");
	CHECK(q.rq_len >= page_round(4 * sizeof(struct siw_rqe)), "RQ ring too small");
	CHECK(c.len >= page_round(16 * sizeof(struct siw_cqe) + sizeof(struct siw_cq_ctrl)),
	      "CQ ring too small");

	/* The provider's own receive lands in the ring we found. */
	REQUIRE(post_recvs(q.qp, 0x5157a11e0001ull, 1) == 0, "post_recv");
	CHECK(q.rq[0].id == 0x5157a11e0001ull && (q.rq[0].flags & SIW_WQE_VALID),
	      "posted receive not in the RQ ring found (id %#" PRIx64 " flags %#x)",
	      (uint64_t)q.rq[0].id, q.rq[0].flags);

	/* A second mapping of the same key is the same memory. */
	sq2 = mmap(NULL, q.sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, q.sq_key);
	CHECK(sq2 != MAP_FAILED, "second mmap of the SQ key: %s", strerror(errno));
	if (sq2 != MAP_FAILED) {
		((struct siw_sqe *)sq2)[3].id = 0xfeedf00d;
		CHECK(q.sq[3].id == 0xfeedf00d, "the second SQ mapping does not alias the first");
		((struct siw_sqe *)sq2)[3].id = 0;
	}
	rq2 = mmap(NULL, q.rq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, q.rq_key);
	CHECK(rq2 != MAP_FAILED, "second mmap of the RQ key: %s", strerror(errno));

	/* Wrong sizes and offsets. */
	p = mmap(NULL, q.sq_len + pg, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, q.sq_key);
	CHECK(p == MAP_FAILED, "mmap of the SQ key one page too long succeeded");
	if (p != MAP_FAILED)
		munmap(p, q.sq_len + pg);
	if (q.sq_len > pg) {
		p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, q.sq_key + pg);
		CHECK(p == MAP_FAILED, "mmap of the second page of the SQ ring alone succeeded");
		if (p != MAP_FAILED)
			munmap(p, pg);
	}
	for (uint64_t key = 0x40000000ull; key < 0x40000000ull + 3 * pg; key += pg) {
		p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, key);
		CHECK(p == MAP_FAILED, "mmap of unknown key %#" PRIx64 " succeeded", key);
		if (p != MAP_FAILED)
			munmap(p, pg);
	}

	/* Destroy the QP: its keys are gone, the extra mappings stay usable memory. */
	rc = ibv_destroy_qp(q.qp);
	CHECK(rc == 0, "destroy_qp: %s", strerror(rc));
	p = mmap(NULL, q.sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, q.sq_key);
	CHECK(p == MAP_FAILED, "mmap of a destroyed QP's SQ key succeeded");
	if (p != MAP_FAILED)
		munmap(p, q.sq_len);
	if (sq2 != MAP_FAILED) {
		memset(sq2, 0x5a, q.sq_len);
		munmap(sq2, q.sq_len);
	}
	if (rq2 != MAP_FAILED) {
		memset(rq2, 0x5a, q.rq_len);
		munmap(rq2, q.rq_len);
	}
	rc = ibv_destroy_cq(c.cq);
	CHECK(rc == 0, "destroy_cq: %s", strerror(rc));
	return PASS;
}

/*
 * Garbage in the rings of one QP, doorbells, a flush through the garbage: error completions
 * or async errors for that QP only; a bystander QP, CQ and rings stay exactly as they were.
 */
static enum result t_garbage(void)
{
	enum { SQ = 64, RQ = 16, B_RECVS = 3 };
	struct cq_ring ca, cb, cc;
	struct qp_rings a, b, c;
	struct ibv_wc wc[SQ + RQ + 8];
	struct ibv_async_event ev;
	uint8_t *b_rq_copy, *b_sq_copy;
	int n, rc, st;
	bool got_event = false;

	REQUIRE(make_cq(&ca, SQ + RQ + 8) == 0, "cq a");
	REQUIRE(make_cq(&cb, 16) == 0, "cq b");
	REQUIRE(make_cq(&cc, 4) == 0, "cq c");
	REQUIRE(make_qp(&a, ca.cq, ca.cq, NULL, SQ, RQ) == 0, "qp a");
	REQUIRE(make_qp(&b, cb.cq, cb.cq, NULL, SQ, RQ) == 0, "qp b");
	REQUIRE(make_qp(&c, cc.cq, cc.cq, NULL, SQ, RQ) == 0, "qp c");
	diag("seed %#" PRIx64, rng_state);

	/* The bystander: receives posted by the provider, its rings copied. */
	REQUIRE(post_recvs(b.qp, 0xb0b0000, B_RECVS) == 0, "post_recv b");
	b_rq_copy = malloc(b.rq_len);
	b_sq_copy = malloc(b.sq_len);
	memcpy(b_rq_copy, b.rq, b.rq_len);
	memcpy(b_sq_copy, b.sq, b.sq_len);

	/* Garbage everywhere in A's send and receive rings, every entry marked valid. */
	fill_random(a.sq, a.sq_len);
	fill_random(a.rq, a.rq_len);
	for (unsigned i = 0; i < a.sq_len / sizeof(struct siw_sqe); i++)
		a.sq[i].flags |= SIW_WQE_VALID;
	for (unsigned i = 0; i < a.rq_len / sizeof(struct siw_rqe); i++)
		a.rq[i].flags |= SIW_WQE_VALID;
	/* A few entries with the fields just past their limits rather than random. */
	a.sq[0].num_sge = SIW_MAX_SGE + 1;
	a.sq[1].opcode = SIW_NUM_OPCODES;
	a.sq[2].flags = SIW_WQE_VALID | SIW_WQE_INLINE;
	a.sq[2].sge[0].length = 0xffffffff;
	a.sq[3].sge[0].laddr = 0xffff800000000000ull;
	a.sq[3].num_sge = 1;
	a.sq[3].opcode = SIW_OP_SEND;
	a.rq[0].num_sge = 0xff;
	a.rq[1].num_sge = 1;
	a.rq[1].sge[0].laddr = 0;
	a.rq[1].sge[0].length = 0xffffffff;

	/* Doorbells in INIT: no work happens before RTS; whatever the answer, no harm. */
	for (int i = 0; i < 4; i++) {
		rc = doorbell(a.qp->handle);
		if (i == 0)
			diag("doorbell on a QP in state %d: %s", qp_state(a.qp), strerror(rc));
	}
	/* To ERROR: the receive ring is flushed through the garbage. */
	rc = to_state(a.qp, IBV_QPS_ERR);
	CHECK(rc == 0, "modify QP with garbage rings to ERROR: %s", strerror(rc));
	for (int i = 0; i < 4; i++) {
		rc = doorbell(a.qp->handle);
		if (i == 0)
			diag("doorbell on a QP in ERROR: %s", strerror(rc));
	}
	n = drain(ca.cq, wc, SQ + RQ + 8);
	diag("QP A: %d completions after the flush", n);
	CHECK(n <= SQ + RQ, "more completions (%d) than ring entries", n);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status != IBV_WC_SUCCESS && wc[i].qp_num == a.qp->qp_num,
		      "completion %d: status %d qp %u, want an error status on QP %u", i,
		      wc[i].status, wc[i].qp_num, a.qp->qp_num);

	/* Garbage in C's CQ ring, every CQE marked valid, notify word too: the kernel finds it
	 * full when C's valid receives are flushed, which must end in an async error. */
	REQUIRE(post_recvs(c.qp, 0xc0c0000, 2) == 0, "post_recv c");
	fill_random(cc.q, cc.len);
	for (unsigned i = 0; i < (cc.len - sizeof(struct siw_cq_ctrl)) / sizeof(struct siw_cqe); i++)
		cc.q[i].flags |= SIW_WQE_VALID;
	rc = to_state(c.qp, IBV_QPS_ERR);
	CHECK(rc == 0, "modify QP on a garbage CQ to ERROR: %s", strerror(rc));
	while (async_event(&ev, 2000) == 0) {
		diag("async event %s", ibv_event_type_str(ev.event_type));
		if ((ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cc.cq) ||
		    (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == c.qp))
			got_event = true;
		CHECK(!(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq != cc.cq) &&
		      !(ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp != c.qp),
		      "async error event for an object that was not corrupted");
		ibv_ack_async_event(&ev);
	}
	/* Counted in the ring, not polled: the provider indexes its opcode and status tables
	 * with a CQE's fields unchecked, and garbage reads past their ends (out of its
	 * mapping, when nothing is mapped after it). */
	n = 0;
	for (unsigned i = 0; i < (cc.len - sizeof(struct siw_cq_ctrl)) / sizeof(struct siw_cqe); i++)
		n += !!(cc.q[i].flags & SIW_WQE_VALID);
	if (!got_event)
		diag("no CQ_ERR/QP_FATAL event for the full garbage CQ; %d CQEs marked valid", n);
	CHECK(got_event, "a CQ full of garbage: no async error (CQ_ERR or QP_FATAL)");

	/* The bystander: same state, empty CQ, rings byte for byte, then its own flush. */
	st = qp_state(b.qp);
	CHECK(st == IBV_QPS_INIT || st == IBV_QPS_RESET, "bystander QP state %d", st);
	CHECK(drain(cb.cq, wc, 16) == 0, "completions appeared on the bystander's CQ");
	CHECK(!memcmp(b_rq_copy, b.rq, b.rq_len), "the bystander's RQ ring changed");
	CHECK(!memcmp(b_sq_copy, b.sq, b.sq_len), "the bystander's SQ ring changed");
	rc = to_state(b.qp, IBV_QPS_ERR);
	CHECK(rc == 0, "bystander to ERROR: %s", strerror(rc));
	n = drain(cb.cq, wc, 16);
	CHECK(n == B_RECVS, "bystander flush: %d completions, want %d", n, B_RECVS);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].wr_id == 0xb0b0000u + i && wc[i].status == IBV_WC_WR_FLUSH_ERR &&
		      wc[i].qp_num == b.qp->qp_num,
		      "bystander completion %d: wr_id %#" PRIx64 " status %d qp %u", i,
		      (uint64_t)wc[i].wr_id, wc[i].status, wc[i].qp_num);

	/* Everything goes away normally; the provider unmaps garbage rings like any other. */
	CHECK((rc = ibv_destroy_qp(a.qp)) == 0, "destroy a: %s", strerror(rc));
	CHECK((rc = ibv_destroy_qp(b.qp)) == 0, "destroy b: %s", strerror(rc));
	CHECK((rc = ibv_destroy_qp(c.qp)) == 0, "destroy c: %s", strerror(rc));
	CHECK((rc = ibv_destroy_cq(ca.cq)) == 0, "destroy cq a: %s", strerror(rc));
	CHECK((rc = ibv_destroy_cq(cb.cq)) == 0, "destroy cq b: %s", strerror(rc));
	CHECK((rc = ibv_destroy_cq(cc.cq)) == 0, "destroy cq c: %s", strerror(rc));
	free(b_rq_copy);
	free(b_sq_copy);
	return PASS;
}

/* SRQ: query (raw), limit modified and queried back, a limit above its size refused. */
static enum result t_srq(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 10, .max_sge = 2, .srq_limit = 3 } };
	struct ib_uverbs_query_srq_resp r;
	struct ibv_srq_attr m;
	struct ibv_srq *srq;
	uint32_t size;
	int rc;

	srq = ibv_create_srq(pd, &sa);
	REQUIRE(srq, "create_srq: %s", strerror(errno));
	rc = raw_query_srq(srq->handle, &r);
	REQUIRE(rc == 0, "query_srq: %s", strerror(rc));
	diag("SRQ of 10 WRs, 2 SGEs, limit 3: max_wr %u max_sge %u srq_limit %u", r.max_wr,
	     r.max_sge, r.srq_limit);
	CHECK(r.max_wr >= 10 && r.max_sge >= 2 && r.srq_limit == 3, "query does not match");
	size = r.max_wr;

	m.srq_limit = 5;
	rc = ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT);
	CHECK(rc == 0, "modify limit 5: %s", strerror(rc));
	CHECK(raw_query_srq(srq->handle, &r) == 0 && r.srq_limit == 5, "limit 5 queried as %u",
	      r.srq_limit);
	m.srq_limit = 0;
	rc = ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT);
	CHECK(rc == 0, "modify limit 0 (disarm): %s", strerror(rc));
	CHECK(raw_query_srq(srq->handle, &r) == 0 && r.srq_limit == 0, "limit 0 queried as %u",
	      r.srq_limit);
	m.srq_limit = size + 1;
	rc = ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT);
	CHECK(rc == EINVAL, "modify limit %u on an SRQ of %u: %s, want EINVAL", size + 1, size,
	      strerror(rc));
	CHECK(raw_query_srq(srq->handle, &r) == 0 && r.srq_limit == 0,
	      "the refused limit left %u", r.srq_limit);
	rc = ibv_destroy_srq(srq);
	CHECK(rc == 0, "destroy_srq: %s", strerror(rc));
	return PASS;
}

/* Garbage in an SRQ's ring and a QP attached to it, taken to ERROR and destroyed. */
static enum result t_garbage_srq(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 2 } };
	struct maps_snapshot s;
	struct mapping m[4];
	struct cq_ring c;
	struct qp_rings q;
	struct ibv_srq *srq;
	struct ibv_wc wc[16];
	int n, rc;

	REQUIRE(make_cq(&c, 16) == 0, "cq");
	snapshot(&s);
	srq = ibv_create_srq(pd, &sa);
	REQUIRE(srq, "create_srq: %s", strerror(errno));
	n = new_maps(&s, m, 4);
	REQUIRE(n == 1, "ibv_create_srq added %d uverbs mappings, expected 1", n);
	REQUIRE(make_qp(&q, c.cq, c.cq, srq, 16, 0) == 0, "qp on srq");
	fill_random((void *)m[0].start, m[0].end - m[0].start);
	for (unsigned i = 0; i < (m[0].end - m[0].start) / sizeof(struct siw_rqe); i++)
		((struct siw_rqe *)m[0].start)[i].flags |= SIW_WQE_VALID;
	fill_random(q.sq, q.sq_len);
	rc = doorbell(q.qp->handle);
	diag("doorbell: %s", strerror(rc));
	rc = to_state(q.qp, IBV_QPS_ERR);
	CHECK(rc == 0, "QP on a garbage SRQ to ERROR: %s", strerror(rc));
	n = drain(c.cq, wc, 16);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status != IBV_WC_SUCCESS, "completion %d with status SUCCESS", i);
	CHECK((rc = ibv_destroy_qp(q.qp)) == 0, "destroy qp: %s", strerror(rc));
	CHECK((rc = ibv_destroy_srq(srq)) == 0, "destroy srq: %s", strerror(rc));
	CHECK((rc = ibv_destroy_cq(c.cq)) == 0, "destroy cq: %s", strerror(rc));
	return PASS;
}

static const struct {
	const char *name, *desc;
	enum result (*fn)(void);
} tests[] = {
	{ "busy", "destroying a CQ, SRQ or PD still used by a QP fails with EBUSY", t_busy },
	{ "srq", "SRQ query, limit modified and queried back, a limit above its size refused",
	  t_srq },
	{ "handles", "unknown, stale and wrong-type handles are refused", t_handles },
	{ "mmap", "rings map twice, wrong keys, sizes and offsets are refused", t_mmap },
	{ "garbage", "garbage in the rings: error completions or async errors for that QP only",
	  t_garbage },
	{ "garbage_srq", "garbage in an SRQ ring and a QP on it", t_garbage_srq },
};

int main(int argc, char **argv)
{
	struct ibv_device **list;
	const char *dev;
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (unsigned i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			printf("%s %s\n", tests[i].name, tests[i].desc);
		return 0;
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s --list | DEVICE [TEST...]\n", argv[0]);
		return 2;
	}
	dev = argv[1];
	if (getenv("RIW_VERBS_DRIVER"))
		driver = getenv("RIW_VERBS_DRIVER");
	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "cannot open device %s\n", dev);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		fprintf(stderr, "ibv_alloc_pd: %s\n", strerror(errno));
		return 1;
	}
	/* Only the subtests that post receives need it: let the others run without MRs. */
	recv_mr = ibv_reg_mr(pd, recv_buf, sizeof(recv_buf), IBV_ACCESS_LOCAL_WRITE);
	if (!recv_mr)
		diag("ibv_reg_mr: %s: the subtests posting receives will fail", strerror(errno));
	for (unsigned i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		enum result r;
		bool want = argc == 2;

		for (int j = 2; j < argc; j++)
			want |= !strcmp(argv[j], tests[i].name);
		if (!want)
			continue;
		failed = false;
		reason[0] = 0;
		diag("--- %s: %s", tests[i].name, tests[i].desc);
		r = tests[i].fn();
		if (r == PASS && failed)
			r = FAIL;
		printf("RESULT %s %s%s%s\n", result_name[r], tests[i].name, reason[0] ? " " : "",
		       reason);
	}
	if (recv_mr)
		ibv_dereg_mr(recv_mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
