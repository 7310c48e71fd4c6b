#!/usr/bin/env bash
# stress: the tests again and again on a machine made busy on purpose. A
# busy loop per core (the hogs) runs beside go test, every test runs
# STRESS_COUNT times, and the packages with goroutines run under the race
# detector as well: tests that wait on real time must wait for progress,
# not for a fixed time, and this is where one that does not shows it.
#
# Knobs (environment):
#   STRESS_COUNT      runs of each test (go test -count; default 3)
#   STRESS_PKGS       packages for the plain pass (default ./...; empty: none)
#   STRESS_RACE_PKGS  packages for the -race pass (default: the race list of
#                     .ci/run, the packages with goroutines; empty: none)
#   STRESS_HOGS       busy loops beside the tests (default: one per core; 0: none)
#   STRESS_TIMEOUT    go test -timeout of each pass (default 60m)
#   STRESS_RUN        go test -run pattern (default: every test)
set -euo pipefail
cd "$(dirname "$0")/.."

count=${STRESS_COUNT:-3}
hogs=${STRESS_HOGS:-$(nproc)}
timeout=${STRESS_TIMEOUT:-60m}
run=${STRESS_RUN:-}
pkgs=${STRESS_PKGS-./...}
if [ -z "${STRESS_RACE_PKGS+set}" ]; then
	# The race list of .ci/run: the VM launcher's guests are too slow under it.
	race_pkgs="./bridge/... ./emu/realtime ./fabric/... $(go list ./internal/app/... | grep -v '/internal/app/vm$' | tr '\n' ' ') ./cmd/dxpu ./cmd/libdxpubridge"
else
	race_pkgs=$STRESS_RACE_PKGS
fi

hog_pids=()
stop_hogs() {
	for p in "${hog_pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${hog_pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	hog_pids=()
}
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
	# A subshell spinning in pure bash: one core's worth of runnable work.
	(while :; do :; done) &
	hog_pids+=($!)
done

args=(-count="$count" -timeout "$timeout")
if [ -n "$run" ]; then
	args+=(-run "$run")
fi
start=$SECONDS
echo "== stress: $hogs hogs, -count=$count"
if [ -n "$pkgs" ]; then
	echo "== go test ${args[*]} $pkgs"
	# shellcheck disable=SC2086 # package lists split on spaces
	go test "${args[@]}" $pkgs
fi
if [ -n "$race_pkgs" ]; then
	echo "== go test -race ${args[*]} $race_pkgs"
	# The docs and Example runs drive a separately built dxpu, which -race
	# does not instrument: the plain pass ran them.
	# shellcheck disable=SC2086
	go test -race "${args[@]}" -skip 'TestDocsRun|TestCommandExamples|TestChaosCampaign' $race_pkgs
fi
echo "== stress: passed in $((SECONDS - start))s"
