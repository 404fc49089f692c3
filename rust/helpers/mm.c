// SPDX-License-Identifier: GPL-2.0
/* Memory mappings. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/mm.h>

unsigned long riw_vma_flags(const struct vm_area_struct *vma)
{
	return vma->vm_flags;
}

void riw_vma_forbid_exec(struct vm_area_struct *vma)
{
	vm_flags_clear(vma, VM_MAYEXEC);
}

bool riw_virt_addr_valid(const void *addr)
{
	return virt_addr_valid(addr);
}

struct page *riw_virt_to_page(const void *addr)
{
	return virt_to_page(addr);
}

void riw_get_page(struct page *page)
{
	get_page(page);
}

void riw_put_page(struct page *page)
{
	put_page(page);
}

bool riw_sendpage_ok(struct page *page)
{
	return sendpage_ok(page);
}
