#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# riw_data.sh with a siw server and a riw client: interoperability of riw with siw.
exec "$(dirname "$0")/riw_data.sh" siw riw
