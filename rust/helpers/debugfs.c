// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs. One-line forwards only: see helpers.h. Without CONFIG_DEBUG_FS these are static
 * inline stubs that fail with -ENODEV, so riw calls them through here in either case.
 */

#include "helpers.h"

struct dentry *riw_debugfs_create_dir(const char *name, struct dentry *parent)
{
	return debugfs_create_dir(name, parent);
}

struct dentry *riw_debugfs_create_file(const char *name, umode_t mode, struct dentry *parent,
				       void *data, const struct file_operations *fops)
{
	return debugfs_create_file(name, mode, parent, data, fops);
}

void riw_debugfs_remove(struct dentry *dentry)
{
	debugfs_remove(dentry);
}
