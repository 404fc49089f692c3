#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_compat.sh with a siw server and a riw client: third-party programs between riw and siw.
exec "$(dirname "$0")/riw_compat.sh" siw riw
