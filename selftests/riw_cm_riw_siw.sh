#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_cm.sh with a riw server and a siw client: interoperability of riw with siw.
exec "$(dirname "$0")/riw_cm.sh" riw siw
