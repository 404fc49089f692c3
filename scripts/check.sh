#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check: everything, on a fresh machine too. Host unit and property tests of the
# protocol core, a short fuzz run per target, the module build, then the kselftest suite in
# the guest on the debug kernel. Ends with the line "N passed, N failed".
set -uo pipefail
. "$(dirname "$0")/toolchain.sh"
cd "$RIW_TOP"

passed=0 failed=0 failures=()
pass() { passed=$((passed + $1)); }
fail() { failed=$((failed + $1)); echo "check: FAILED: $2"; failures+=("$2"); }
log=$(mktemp -d "${TMPDIR:-/tmp}/riw-check.XXXXXX")

"$RIW_TOP/scripts/install-deps.sh" || { echo "check: installing dependencies failed"; exit 1; }

proto=drivers/infiniband/sw/riw/proto
echo "check: host tests of the protocol core"
cargo test --manifest-path "$proto/Cargo.toml" 2>&1 | tee "$log/cargo.log"
cargo_rc=${PIPESTATUS[0]}
read -r p f < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log/cargo.log")
pass "$p"
[ "$f" -eq 0 ] || fail "$f" "cargo test"
[ "$cargo_rc" -eq 0 ] || [ "$f" -gt 0 ] || fail 1 "cargo test exited with $cargo_rc"

# make check-long (RIW_LONG=1) fuzzes longer and lets the guest suites run their longer
# sweeps (RIW_LONG reaches the guest through selftests/vm/run.sh).
[ -z "${RIW_LONG:-}" ] || : "${RIW_FUZZ_SECONDS:=120}"
echo "check: fuzz smoke (${RIW_FUZZ_SECONDS:=20} s per target)"
if "$proto/fuzz/run.sh" "$RIW_FUZZ_SECONDS" >"$log/fuzz.log" 2>&1; then
	pass 1
	tail -n 1 "$log/fuzz.log"
else
	tail -n 30 "$log/fuzz.log"
	fail 1 "fuzzing found a crash (see $log/fuzz.log)"
fi

echo "check: building riw.ko against the debug kernel"
if "$RIW_TOP/scripts/build-module.sh" debug; then
	pass 1
	# The suites that connect siw devices run in guests of their own, one each: siw
	# read-locks a socket's callback lock with softirqs enabled (its data_ready, state_change
	# and write_space callbacks), which lockdep reports as soon as any TCP listener closes with
	# connections not yet accepted; after one report lockdep is off for the rest of the
	# boot. So riw's own suites keep a lockdep of their own, and lib.sh names siw's report
	# (and only it) when it shows up in those guests.
	# The smoke test keeps a guest of its own: siw is unloaded at its end, and a lockdep
	# report that came later would show siw's saved stack traces under the symbols of
	# whatever module was loaded at those addresses since, which would hide whose report it
	# is. make check runs riw_data.sh with a siw client and a riw server, in one guest with
	# the pyverbs suite (whose reference run is on siw); make check-long runs it the other
	# way too, and riw_cm.sh, the third-party programs and NFS against siw, a guest per
	# direction. siw also meets riw across two guests in make check (riw_two_guests.sh:
	# rping both ways, a riw NVMe-oF host on a siw target), and riw_cm.sh, the programs and
	# NFS run riw to riw there.
	if [ -z "${RIW_LONG:-}" ]; then
		with_siw=('riw_smoke\.sh' '(riw_data_siw_riw|riw_pyverbs)\.sh')
	else
		with_siw=('riw_smoke\.sh' 'riw_(cm|data|compat|nfs)_riw_siw\.sh'
			'(riw_(cm|data|compat|nfs)_siw_riw|riw_pyverbs)\.sh')
	fi
	# The suite between two machines runs in the first of two guests joined by a link
	# (selftests/vm/pair.sh); siw is loaded there too.
	two_guests='riw_two_guests\.sh'
	# riw's own suites take four guests: connections and traffic with their counters and
	# resources; the interoperability with the iw_cxgb4 model and third-party programs, the
	# fuzzer, allocation faults and teardowns; the storage protocols; and the rest.
	traffic_guest='riw_(cm|data|stats|resource)\.sh'
	second_guest='riw_(cxgb4|compat|fuzz|fault|teardown)\.sh'
	storage_guest='riw_(nvme|iser|smb|nfs)\.sh'
	# make check-long's 100 rounds of each teardown (riw_teardown.sh) would take one guest
	# hours: four guests of their own share them out, first of all.
	teardown='riw_teardown\.sh' teardown_guests=0
	[ -z "${RIW_LONG:-}" ] || teardown_guests=4
	mapfile -t suites < <(make -s --no-print-directory -C selftests emit_tests | sed 's/^riw://')
	own_first=() own_traffic=() own_second=() own_storage=()
	for t in "${suites[@]::${#suites[@]}-1}"; do # the last one (kmemleak) runs in every guest
		elsewhere=
		for re in "${with_siw[@]}" "$two_guests" '.*_(riw_siw|siw_riw)\.sh'; do
			[[ $t =~ ^$re$ ]] && elsewhere=1
		done
		if [ "$teardown_guests" -gt 0 ] && [[ $t =~ ^$teardown$ ]]; then
			continue
		elif [[ $t =~ ^$traffic_guest$ ]]; then
			own_traffic+=("$t")
		elif [[ $t =~ ^$second_guest$ ]]; then
			own_second+=("$t")
		elif [[ $t =~ ^$storage_guest$ ]]; then
			own_storage+=("$t")
		elif [ -z "$elsewhere" ]; then
			own_first+=("$t")
		fi
	done
	group() { echo "^($(IFS='|'; echo "$*"))\$"; }
	# Longest first, so that the two running at a time end close together. A guest's
	# variables for its suites, if any, in guest_env under its index; guest_name names it.
	filters=() guest_env=()
	for ((i = 0; i < teardown_guests; i++)); do
		guest_env[i]=RIW_TEARDOWN_ROUNDS=$((100 / teardown_guests))
		filters+=("^$teardown\$")
	done
	filters+=("$(group "${own_second[@]}")" "$(group "${own_traffic[@]}")"
		"$(group "${own_storage[@]}")" "$(group "${own_first[@]}")")
	for ((i = ${#with_siw[@]} - 1; i >= 1; i--)); do filters+=("^${with_siw[i]}\$"); done
	filters+=("^$two_guests\$" "^${with_siw[0]}\$") # the smoke test last, the shortest
	guest_name() { echo "${filters[$1]}${guest_env[$1]:+ (${guest_env[$1]})}"; }
	# Two guests of one vCPU each run at a time (RIW_GUESTS sets how many): on a 2-core
	# machine each then keeps a core, where guests of two vCPUs slowed each other down as
	# much as running one after the other. The pair counts as one: its second guest mostly
	# waits for commands. One that hangs is given up on long before CI's own limit, and the
	# others still run. make check-long's teardown guests and its fuzzer's 13 minutes more
	# take hours on a slow machine.
	slots=${RIW_GUESTS:-2}
	guest_timeout=3000
	[ -z "${RIW_LONG:-}" ] || guest_timeout=12000
	guest_suite() { # INDEX
		local filter=${filters[$1]} guest_args=(--smp 1) start=$SECONDS
		[ "$filter" != "^$two_guests\$" ] || guest_args=(--pair)
		[ -z "${guest_env[$1]:-}" ] || guest_args+=(--env "${guest_env[$1]}")
		selftests/vm/kselftest.sh "${guest_args[@]}" --variant debug --timeout "$guest_timeout" \
			--module "$(riw_module_dir debug)/riw.ko" \
			--module "$(riw_module_dir debug)/selftests/kverbs/riw_kverbs_test.ko" \
			--module "$(riw_module_dir debug)/selftests/kverbs/riw_kconn_test.ko" \
			--module "$(riw_module_dir debug)/selftests/kverbs/riw_kfault_test.ko" \
			--filter "$filter" >"$log/guest-$1.log" 2>&1
		echo "check: guest suite took $(((SECONDS - start) / 60)) min" >>"$log/guest-$1.log"
	}
	# A finished guest's log, then its results; the summary below names what failed.
	guest_results() { # INDEX
		local glog=$log/guest-$1.log p f
		echo "check: guest suite on the debug kernel: $(guest_name "$1")"
		cat "$glog"
		read -r p f < <(sed -n 's/^guest: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$glog")
		pass "${p:-0}"
		[ "${f:-1}" -eq 0 ] && return
		fail "${f:-1}" "guest suite $(guest_name "$1")"
		# Its failed results, nested ones too, and the steps that ran out of time.
		mapfile -t -O "${#failures[@]}" failures < <(sed -n \
			-e 's/^# \(# \)*\(timed out after [0-9]* s: .\{0,60\}\).*/      \2/p' \
			-e 's/^# \(# \)*\(not ok [0-9]* .*\)/    \2/p' \
			-e 's/^\(not ok [0-9]* .*\)/  \1/p' \
			-e 's/^# riw: \(incomplete run: .*\)/  \1/p' "$glog")
	}
	declare -A running=()
	next=0
	while [ "$next" -lt "${#filters[@]}" ] || [ "${#running[@]}" -gt 0 ]; do
		if [ "$next" -lt "${#filters[@]}" ] && [ "${#running[@]}" -lt "$slots" ]; then
			echo "check: guest suite started: $(guest_name "$next")"
			guest_suite "$next" &
			running[$!]=$next
			next=$((next + 1))
			continue
		fi
		wait -n -p done_pid "${!running[@]}" || true
		guest_results "${running[$done_pid]}"
		unset "running[$done_pid]"
	done
else
	fail 1 "module build"
fi

# What failed, again at the end, where a log's tail shows it.
[ "$failed" -eq 0 ] || printf 'check: failed: %s\n' "${failures[@]}"
echo "check: took $((SECONDS / 60)) min"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
