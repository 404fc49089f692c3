#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_data.sh with a riw server and a siw client: interoperability of riw with siw.
exec "$(dirname "$0")/riw_data.sh" riw siw
