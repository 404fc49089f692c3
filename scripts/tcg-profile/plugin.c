// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts what the guest kernel executes, exactly: for each
 * translated block of kernel code, how often it ran between two runs of a marker function
 * (the guest calls it to open and close a window). Counting instructions rather than
 * sampling time makes two builds comparable under TCG, where timings move from run to run
 * by more than the differences looked for.
 *
 * Arguments: marker=ADDR (hex, a kernel function's entry), out=DIR, and optionally
 * trace=FILE, a list of function addresses (hex, one per line) whose entries are logged
 * with the vCPU and its count of executed kernel instructions so far; with clock=1, the
 * host's monotonic clock in nanoseconds instead, and nothing else is instrumented (no
 * counts), so that the emulation runs at its own pace: what each step costs in time,
 * where instructions differ in cost (atomics, indirect branches, memory accesses).
 *
 * Each closed window N leaves DIR/counts.N: one line per block, "vaddr insns execs
 * string-ops divisions atomics" (the instructions TCG runs most slowly: an iteration per
 * block, or a helper call), and with trace= DIR/trace.N: "vcpu address instructions".
 *
 * Declares the few plugin API calls it uses (QEMU_PLUGIN_VERSION 1, QEMU 7.2 and later).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  void (*cb)(unsigned int, void *), int flags,
					  void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, int op, void *ptr,
					      uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t i);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define KERNEL_START 0xffff800000000000ull
#define BUCKETS (1 << 20)
#define MAX_TRACED 8192
#define MAX_RECORDS (1 << 22)
#define MAX_VCPUS 64

struct block {
	uint64_t vaddr, insns, execs;
	unsigned int string_ops, divisions, atomics;
	struct block *next;
};

struct record {
	uint64_t addr, insns;
	unsigned int vcpu;
};

static struct block *blocks[BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t marker;
static const char *outdir = ".";
static unsigned int window; /* odd: a window is open */
static uint64_t traced[MAX_TRACED];
static unsigned int ntraced;
static uint64_t vcpu_insns[MAX_VCPUS];
static struct record *records;
static uint64_t nrecords;
static bool clock_mode;

static struct block *block_of(uint64_t vaddr, uint64_t insns)
{
	size_t h = (vaddr * 0x9e3779b97f4a7c15ull) >> 44;
	struct block *b;

	for (b = blocks[h]; b; b = b->next)
		if (b->vaddr == vaddr && b->insns == insns)
			return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->vaddr = vaddr;
	b->insns = insns;
	b->next = blocks[h];
	blocks[h] = b;
	return b;
}

/*
 * Counts the string instructions with a repeat prefix, the divisions and the atomics (a
 * lock prefix, or xchg with memory) of a block.
 */
static void classify(struct qemu_plugin_tb *tb, struct block *b)
{
	b->string_ops = b->divisions = b->atomics = 0;
	for (size_t i = 0; i < b->insns; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const uint8_t *p = qemu_plugin_insn_data(insn);
		size_t len = qemu_plugin_insn_size(insn), k = 0;
		bool rep = false, lock = false;
		uint8_t op;

		while (k < len && (p[k] == 0xf0 || p[k] == 0xf2 || p[k] == 0xf3 || p[k] == 0x66 ||
				   p[k] == 0x2e || p[k] == 0x3e || p[k] == 0x64 || p[k] == 0x65)) {
			rep |= p[k] == 0xf2 || p[k] == 0xf3;
			lock |= p[k] == 0xf0;
			k++;
		}
		if (k < len && (p[k] & 0xf0) == 0x40) /* REX */
			k++;
		if (k >= len)
			continue;
		op = p[k];
		if (rep && (op == 0xa4 || op == 0xa5 || op == 0xaa || op == 0xab))
			b->string_ops++;
		if ((op == 0xf6 || op == 0xf7) && k + 1 < len && ((p[k + 1] >> 4) & 3) == 3)
			b->divisions++; /* div and idiv: /6 and /7 */
		if (lock || ((op == 0x86 || op == 0x87) && k + 1 < len && (p[k + 1] >> 6) != 3))
			b->atomics++;
	}
}

static void dump(unsigned int n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/counts.%u", outdir, n);
	f = fopen(path, "w");
	for (size_t i = 0; f && i < BUCKETS; i++)
		for (struct block *b = blocks[i]; b; b = b->next)
			if (b->execs)
				fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 " %u %u %u\n",
					b->vaddr, b->insns, b->execs, b->string_ops,
					b->divisions, b->atomics);
	if (f)
		fclose(f);
	if (!records)
		return;
	snprintf(path, sizeof(path), "%s/trace.%u", outdir, n);
	f = fopen(path, "w");
	for (uint64_t i = 0; f && i < nrecords && i < MAX_RECORDS; i++)
		fprintf(f, "%u %" PRIx64 " %" PRIu64 "\n", records[i].vcpu, records[i].addr,
			records[i].insns);
	if (f)
		fclose(f);
}

static void on_marker(unsigned int vcpu, void *unused)
{
	pthread_mutex_lock(&lock);
	window++;
	if (window % 2) {
		for (size_t i = 0; i < BUCKETS; i++)
			for (struct block *b = blocks[i]; b; b = b->next)
				b->execs = 0;
		__atomic_store_n(&nrecords, 0, __ATOMIC_RELAXED);
	} else {
		dump(window / 2);
	}
	pthread_mutex_unlock(&lock);
}

static void on_block(unsigned int vcpu, void *insns)
{
	vcpu_insns[vcpu % MAX_VCPUS] += (uintptr_t)insns;
}

static void on_traced(unsigned int vcpu, void *addr)
{
	uint64_t i;

	if (!(__atomic_load_n(&window, __ATOMIC_RELAXED) % 2))
		return;
	i = __atomic_fetch_add(&nrecords, 1, __ATOMIC_RELAXED);
	if (i >= MAX_RECORDS)
		return;
	records[i].vcpu = vcpu;
	records[i].addr = (uintptr_t)addr;
	if (clock_mode) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		records[i].insns = (uint64_t)now.tv_sec * 1000000000u + now.tv_nsec;
	} else {
		records[i].insns = vcpu_insns[vcpu % MAX_VCPUS];
	}
}

/* The callbacks of both modes: a traced entry's log and the marker's windows. */
static void register_entries(struct qemu_plugin_tb *tb, uint64_t vaddr)
{
	for (unsigned int i = 0; i < ntraced; i++)
		if (traced[i] == vaddr)
			qemu_plugin_register_vcpu_tb_exec_cb(tb, on_traced, 0,
							     (void *)(uintptr_t)vaddr);
	if (vaddr == marker)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_marker, 0, NULL);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	uint64_t insns = qemu_plugin_tb_n_insns(tb);
	struct block *b;

	if (vaddr < KERNEL_START)
		return;
	if (!clock_mode) {
		pthread_mutex_lock(&lock);
		b = block_of(vaddr, insns);
		classify(tb, b);
		pthread_mutex_unlock(&lock);
		/* Not atomic: two vCPUs running one block at once may lose a count, rarely. */
		qemu_plugin_register_vcpu_tb_exec_inline(tb, 0 /* add */, &b->execs, 1);
		/* Ahead of a traced entry's log, which reads the count it keeps. */
		if (records)
			qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, 0,
							     (void *)(uintptr_t)insns);
	}
	register_entries(tb, vaddr);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
								 const qemu_info_t *info,
								 int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "marker=", 7)) {
			marker = strtoull(argv[i] + 7, NULL, 16);
		} else if (!strcmp(argv[i], "clock=1")) {
			clock_mode = true;
		} else if (!strncmp(argv[i], "out=", 4)) {
			outdir = argv[i] + 4;
		} else if (!strncmp(argv[i], "trace=", 6)) {
			FILE *f = fopen(argv[i] + 6, "r");
			char line[64];

			if (!f)
				return -1;
			while (ntraced < MAX_TRACED && fgets(line, sizeof(line), f))
				traced[ntraced++] = strtoull(line, NULL, 16);
			fclose(f);
			records = calloc(MAX_RECORDS, sizeof(*records));
			if (!records)
				return -1;
		} else {
			return -1;
		}
	}
	if (!marker)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
