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
