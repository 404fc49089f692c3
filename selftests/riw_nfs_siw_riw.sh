#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_nfs.sh with a siw server and a riw client: NFS over RDMA between riw and siw.
exec "$(dirname "$0")/riw_nfs.sh" siw riw
