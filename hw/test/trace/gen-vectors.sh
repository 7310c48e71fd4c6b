#!/usr/bin/env bash
# Records what dxpu's Go bridge (the shipped `dxpu bridge --role gpu --pcie
# memory`, unkeyed) answers to each trace test/vectors/*.txt into
# test/vectors/*.want, the frames the RTL must reproduce (trace-rtl.sh).
# With --check it compares instead of writing: the committed record is
# still what the Go bridge does.
#
# DXPU: the dxpu binary (default: built from the tree above into BUILD).
set -euo pipefail
cd "$(dirname "$0")/../.."
check=0
[ "${1:-}" = --check ] && check=1
build=${BUILD:-build}
if [ -z "${DXPU:-}" ]; then
	mkdir -p "$build"
	(cd .. && CGO_ENABLED=0 go build -o "hw/$build/dxpu" ./cmd/dxpu)
	DXPU=$build/dxpu
fi
port=${TRACE_PORT:-17101}
fail=0
for trace in test/vectors/*.txt; do
	want=${trace%.txt}.want
	got=$build/$(basename "$trace" .txt).go.got
	"$DXPU" bridge --role gpu --pcie memory --insecure-no-keys --pair 1 --listen 127.0.0.1:$port \
		--peer 127.0.0.1:$((port + 1)) --mem-base 0x2000000000 --mem-size 64K >"$build/dxpu-bridge.log" 2>&1 &
	pid=$!
	rc=0
	python3 test/trace/replay.py --peer 127.0.0.1:$port --local 127.0.0.1:$((port + 1)) --trace "$trace" --out "$got" || rc=$?
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [ $rc -ne 0 ]; then
		echo "trace: the Go bridge failed $trace (its log: $build/dxpu-bridge.log)" >&2
		exit 1
	fi
	if [ $check = 1 ]; then
		if ! diff -u "$want" "$got" >"$got.diff"; then
			echo "trace: the Go bridge no longer answers $trace as $want records (diff: $got.diff)" >&2
			fail=1
		else
			echo "trace: $trace: the Go bridge answers as recorded ($(grep -c '^tlp' "$want") TLP frames)"
		fi
	else
		cp "$got" "$want"
		echo "trace: recorded $want"
	fi
done
exit $fail
