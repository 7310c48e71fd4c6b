#!/usr/bin/env bash
# The RTL and the Go bridge answer the same traffic with the same frames:
# each trace test/vectors/*.txt is replayed (replay.py) into the simulated
# RTL bridge (the harness, frames to it in mixed encapsulations) and its
# normalised answer compared byte for byte with test/vectors/*.want, the
# Go bridge's recorded answer; then the Go bridge (the shipped dxpu) is
# replayed the same trace, so the record is known to be current.
#
# SIM: the harness binary; DXPU: the dxpu binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
mkdir -p "$build"
SIM=${SIM:-obj_dir/Vdxpu_bridge_gpu}
iut=${TRACE_IUT:-127.0.0.131} host=${TRACE_HOST:-127.0.0.130}
fail=0
for trace in test/vectors/*.txt; do
	want=${trace%.txt}.want
	got=$build/$(basename "$trace" .txt).rtl.got
	"$SIM" --listen "$iut:8855" --peer "$host:8855" --mem-base 0x2000000000 --mem-size 65536 --encap mixed \
		2>"$build/harness.log" &
	pid=$!
	rc=0
	python3 test/trace/replay.py --peer "$iut:8855" --local "$host:8855" --trace "$trace" --out "$got" || rc=$?
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [ $rc -ne 0 ]; then
		echo "trace: the RTL bridge failed $trace (harness log: $build/harness.log)" >&2
		fail=1
	elif ! diff -u "$want" "$got" >"$got.diff"; then
		echo "trace: the RTL bridge's answer to $trace differs from the Go bridge's ($got.diff):" >&2
		head -20 "$got.diff" >&2
		fail=1
	else
		echo "trace: $trace: the RTL bridge answers as the Go bridge ($(grep -c '^tlp' "$want") TLP frames byte for byte)"
	fi
done
DXPU=${DXPU:-} BUILD=$build test/trace/gen-vectors.sh --check || fail=1
if [ $fail = 0 ]; then echo "trace: 1 passed, 0 failed"; else echo "trace: 0 passed, 1 failed"; fi
exit $fail
