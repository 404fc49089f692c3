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
 * With tlb=BITS, a model of QEMU's softmmu TLB counts the kernel's TLB misses; with
 * jmpcache=1, a model of QEMU's jump cache counts the misses of unchained block entries;
 * with coherence=1, a model of the host's caches counts the lines that move between vCPUs;
 * with pages=1, each page's accesses are counted, per vCPU.
 *
 * Each closed window N leaves DIR/counts.N: one line per block, "vaddr insns execs
 * string-ops divisions atomics accesses lookup tlb-misses jump-misses jump-lookups
 * transfers" (the instructions TCG runs most slowly: an iteration per block, or a helper
 * call; the memory accesses; whether the block's exit looks the next block up; what the
 * models saw, the jump cache's charged to the block entered; user code's line transfers
 * under address 0), with trace= DIR/trace.N: "vcpu address instructions", and with
 * pages=1 DIR/pages.N: "vcpu page count first-block module-accesses".
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
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
				      void (*cb)(unsigned int, uint32_t, uint64_t, void *),
				      int flags, int rw, void *userdata);
void qemu_plugin_register_vcpu_mem_inline(struct qemu_plugin_insn *insn, int rw, int op,
					  void *ptr, uint64_t imm);
struct qemu_plugin_hwaddr;
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(uint32_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
bool qemu_plugin_mem_is_store(uint32_t info);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define KERNEL_START 0xffff800000000000ull
#define BUCKETS (1 << 20)
#define MAX_TRACED 8192
#define MAX_RECORDS (1 << 22)
#define MAX_VCPUS 64

struct block {
	uint64_t vaddr, insns, execs, accesses, misses, jump_misses, jump_lookups, transfers;
	unsigned int string_ops, divisions, atomics, lookups;
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
/* With tlb=BITS: a model of QEMU's softmmu TLB per vCPU, 2^BITS entries, direct mapped by
 * page, with 8 victim entries; kernel accesses to kernel and to user addresses apart (QEMU
 * keeps them under different MMU indexes). */
static unsigned int tlb_bits;
struct tlb {
	uint64_t *entries, victims[8];
	unsigned int next_victim;
};
static struct tlb tlbs[MAX_VCPUS][2];

/* With jmpcache=1: a model of QEMU's per-vCPU jump cache (QEMU 7.2: 4096 entries, hashed
 * on the guest PC), which every block entry not chained from the block before looks up
 * (after a return or an indirect branch, or across a page); a miss costs a search of the
 * global table of translations. User code runs through the model too: it shares the cache. */
#define JUMP_CACHE_BITS 12
static bool jump_cache;
struct jump_state {
	uint64_t pcs[1 << JUMP_CACHE_BITS];
	uint64_t page; /* the first page of the block before, */
	bool looked_up; /* and whether it left by a lookup anyway */
};
static struct jump_state *jump_states[MAX_VCPUS];

/*
 * With coherence=1: which vCPUs hold each 64-byte line of guest RAM (by physical address),
 * in the way of a host's caches (one writer, or many readers): an access by a vCPU to a line
 * another vCPU has written since, or a write to a line other vCPUs read, moves the line
 * between host cores. Under MTTCG each vCPU is a host thread, and those moves cost the
 * emulation what they cost native code, which instruction counts do not show. User code's
 * moves are charged to one block at address 0.
 */
#define COHERENCE_LINES (1ull << 26) /* 4 GiB of physical addresses */
#define LINE_MODIFIED 0x80
static uint8_t *line_state;
static struct block *user_block;

/*
 * With pages=1: how often each page (by virtual address, user and kernel) is accessed,
 * per vCPU, for the hot pages of an iteration: each needs an entry in QEMU's softmmu TLB,
 * direct mapped, where more pages conflict more.
 */
#define PAGE_SLOTS (1u << 20)
#define MODULES_START 0xffffffffa0000000ull
struct page_count {
	uint64_t page, count, first_pc, module_count;
};
static bool count_pages;
static struct page_count *page_tables[MAX_VCPUS];

static void on_page_access(unsigned int vcpu, uint32_t info, uint64_t vaddr, void *pc)
{
	struct page_count *t = page_tables[vcpu % MAX_VCPUS];
	uint64_t page = (vaddr >> 12) | 1ull << 63;
	uint32_t h = (uint32_t)((page * 0x9e3779b97f4a7c15ull) >> 44);

	if (!t && !(t = page_tables[vcpu % MAX_VCPUS] = calloc(PAGE_SLOTS, sizeof(*t))))
		abort();
	for (;; h = (h + 1) & (PAGE_SLOTS - 1)) {
		if (t[h].page == page) {
			if (!t[h].count++)
				t[h].first_pc = (uintptr_t)pc;
			t[h].module_count += (uintptr_t)pc >= MODULES_START;
			return;
		}
		if (!t[h].page) {
			t[h].page = page;
			t[h].count = 1;
			t[h].first_pc = (uintptr_t)pc;
			t[h].module_count = (uintptr_t)pc >= MODULES_START;
			return;
		}
	}
}

static void on_coherent_access(unsigned int vcpu, uint32_t info, uint64_t vaddr, void *block)
{
	struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
	uint64_t line;
	uint8_t me = 1u << (vcpu % 7), st, next;

	if (!hw || qemu_plugin_hwaddr_is_io(hw))
		return;
	line = qemu_plugin_hwaddr_phys_addr(hw) >> 6;
	if (line >= COHERENCE_LINES)
		return;
	st = __atomic_load_n(&line_state[line], __ATOMIC_RELAXED);
	if (qemu_plugin_mem_is_store(info)) {
		next = LINE_MODIFIED | me;
		if ((st & 0x7f) & ~me)
			((struct block *)block)->transfers++;
	} else {
		if ((st & LINE_MODIFIED) && !(st & me))
			((struct block *)block)->transfers++;
		next = (st & 0x7f) | me;
		if (st & me)
			next = st;
	}
	if (next != st)
		__atomic_store_n(&line_state[line], next, __ATOMIC_RELAXED);
}

static unsigned int jump_hash(uint64_t pc)
{
	uint64_t tmp = pc ^ (pc >> 6);

	return ((tmp >> 6) & 0xfc0) | (tmp & 0x3f);
}

static void on_block_entry(unsigned int vcpu, void *userdata)
{
	struct block *b = userdata;
	uint64_t pc = b->vaddr, page = pc >> 12;
	struct jump_state *j = jump_states[vcpu % MAX_VCPUS];

	if (!j && !(j = jump_states[vcpu % MAX_VCPUS] = calloc(1, sizeof(*j))))
		abort();
	if (j->looked_up || page != j->page) {
		uint64_t *e = &j->pcs[jump_hash(pc)];

		b->jump_lookups++;
		if (*e != pc) {
			*e = pc;
			b->jump_misses++;
		}
	}
	j->page = page;
	j->looked_up = b->lookups;
}

static void on_access(unsigned int vcpu, uint32_t info, uint64_t vaddr, void *block)
{
	struct tlb *t = &tlbs[vcpu % MAX_VCPUS][vaddr < KERNEL_START];
	uint64_t page = (vaddr >> 12) + 1, *e;

	if (!t->entries && !(t->entries = calloc(1u << tlb_bits, sizeof(*t->entries))))
		abort();
	e = &t->entries[(page - 1) & ((1u << tlb_bits) - 1)];
	if (*e == page)
		return;
	for (unsigned int i = 0; i < 8; i++) {
		if (t->victims[i] == page) {
			t->victims[i] = *e;
			*e = page;
			return;
		}
	}
	t->victims[t->next_victim++ % 8] = *e;
	*e = page;
	((struct block *)block)->misses++;
}

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
 * Whether the instruction ending a block at `vaddr` (opcode bytes `p`, the next one at
 * `next`) leaves it by a lookup of the next block rather than a chained jump: a return,
 * an indirect call or jump, or a direct one to another page (QEMU chains only within the
 * block's page).
 */
static unsigned int exit_looks_up(uint64_t vaddr, uint64_t next, const uint8_t *p, size_t n)
{
	int64_t rel;

	if (!n)
		return 0;
	if (p[0] == 0xc3 || p[0] == 0xc2)
		return 1;
	if (p[0] == 0xff && n > 1)
		return ((p[1] >> 3) & 7) >= 2 && ((p[1] >> 3) & 7) <= 5;
	if ((p[0] == 0xe8 || p[0] == 0xe9) && n >= 5)
		rel = (int32_t)(p[1] | p[2] << 8 | p[3] << 16 | (uint32_t)p[4] << 24);
	else if (p[0] == 0xeb && n >= 2)
		rel = (int8_t)p[1];
	else
		return 0;
	return ((next + rel) ^ vaddr) >> 12 != 0;
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
		if (i + 1 == b->insns)
			b->lookups = exit_looks_up(b->vaddr, qemu_plugin_insn_vaddr(insn) + len,
						   p + k, len - k);
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
				fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 " %u %u %u %" PRIu64
					" %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
					b->vaddr, b->insns, b->execs, b->string_ops,
					b->divisions, b->atomics, b->accesses, b->lookups,
					b->misses, b->jump_misses, b->jump_lookups,
					b->transfers);
	if (f)
		fclose(f);
	if (count_pages) {
		snprintf(path, sizeof(path), "%s/pages.%u", outdir, n);
		f = fopen(path, "w");
		for (unsigned int v = 0; f && v < MAX_VCPUS; v++)
			for (size_t i = 0; page_tables[v] && i < PAGE_SLOTS; i++)
				if (page_tables[v][i].count)
					fprintf(f, "%u %" PRIx64 " %" PRIu64 " %" PRIx64
						" %" PRIu64 "\n", v,
						page_tables[v][i].page << 12,
						page_tables[v][i].count,
						page_tables[v][i].first_pc,
						page_tables[v][i].module_count);
		if (f)
			fclose(f);
	}
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
			for (struct block *b = blocks[i]; b; b = b->next) {
				b->execs = b->accesses = b->misses = 0;
				b->jump_misses = b->jump_lookups = b->transfers = 0;
			}
		__atomic_store_n(&nrecords, 0, __ATOMIC_RELAXED);
		for (unsigned int v = 0; v < MAX_VCPUS; v++)
			for (size_t i = 0; page_tables[v] && i < PAGE_SLOTS; i++)
				page_tables[v][i].count = page_tables[v][i].module_count = 0;
	} else {
		if (user_block)
			user_block->execs = 1;
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

	if (count_pages && !clock_mode)
		for (size_t i = 0; i < insns; i++)
			qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i),
							 on_page_access, 0, 3,
							 (void *)(uintptr_t)vaddr);
	if (vaddr < KERNEL_START) {
		if (line_state && !clock_mode)
			for (size_t i = 0; i < insns; i++)
				qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i),
								 on_coherent_access, 0, 3,
								 user_block);
		/* User code is not counted, but shares the jump cache. */
		if (jump_cache && !clock_mode) {
			b = calloc(1, sizeof(*b));
			if (!b)
				abort();
			b->vaddr = vaddr;
			b->insns = insns;
			classify(tb, b);
			qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block_entry, 0, b);
		}
		return;
	}
	if (!clock_mode) {
		pthread_mutex_lock(&lock);
		b = block_of(vaddr, insns);
		classify(tb, b);
		pthread_mutex_unlock(&lock);
		/* Not atomic: two vCPUs running one block at once may lose a count, rarely. */
		qemu_plugin_register_vcpu_tb_exec_inline(tb, 0 /* add */, &b->execs, 1);
		if (jump_cache)
			qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block_entry, 0, b);
		for (size_t i = 0; i < insns; i++) {
			struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

			qemu_plugin_register_vcpu_mem_inline(insn, 3 /* loads and stores */,
							     0 /* add */, &b->accesses, 1);
			if (tlb_bits)
				qemu_plugin_register_vcpu_mem_cb(insn, on_access, 0 /* no regs */,
								 3, b);
			if (line_state)
				qemu_plugin_register_vcpu_mem_cb(insn, on_coherent_access, 0,
								 3, b);
		}
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
		} else if (!strncmp(argv[i], "tlb=", 4)) {
			tlb_bits = strtoul(argv[i] + 4, NULL, 10);
			if (tlb_bits < 1 || tlb_bits > 22)
				return -1;
		} else if (!strcmp(argv[i], "pages=1")) {
			count_pages = true;
		} else if (!strcmp(argv[i], "coherence=1")) {
			line_state = calloc(COHERENCE_LINES, 1);
			user_block = block_of(0, 0);
			if (!line_state)
				return -1;
		} else if (!strcmp(argv[i], "jmpcache=1")) {
			jump_cache = true;
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
