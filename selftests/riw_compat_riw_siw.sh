#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_compat.sh with a riw server and a siw client: third-party programs between riw and siw.
exec "$(dirname "$0")/riw_compat.sh" riw siw
