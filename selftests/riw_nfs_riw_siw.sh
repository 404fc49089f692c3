#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_nfs.sh with a riw server and a siw client: NFS over RDMA between riw and siw.
exec "$(dirname "$0")/riw_nfs.sh" riw siw
