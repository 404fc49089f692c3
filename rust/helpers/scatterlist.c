// SPDX-License-Identifier: GPL-2.0
/* Scatterlists. One-line forwards only: see helpers.h. */

#include "helpers.h"
#include <linux/scatterlist.h>

struct page *riw_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}
