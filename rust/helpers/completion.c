// SPDX-License-Identifier: GPL-2.0
/* Completions. One-line forwards only: see helpers.h. */

#include "helpers.h"

void riw_init_completion(struct completion *done)
{
	init_completion(done);
}
