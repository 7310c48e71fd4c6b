#!/usr/bin/env bash
# Builds and runs every Verilator testbench hw/test/tb_<module>.cpp against
# RTL module <module>, then prints the sum of their "N passed, M failed"
# lines. A testbench may add Verilator arguments (parameters, a wrapper
# file) in a line "// verilator-args: ...". TESTS=name,name runs a subset.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
build=${BUILD:-build}/test
mkdir -p "$build"
rtl=$(scripts/rtl-files.sh)
total_p=0 total_f=0 broken=()
for tb in test/tb_*.cpp; do
	name=$(basename "$tb" .cpp)
	mod=${name#tb_}
	if [ -n "${TESTS:-}" ] && [[ ",$TESTS," != *",$mod,"* ]]; then continue; fi
	extra=$(sed -n 's#^// verilator-args: ##p' "$tb")
	dir=$build/$mod
	# -O1 and one job per test: the CI machine has two loaded cores, and
	# the testbenches are small.
	if ! verilator --cc --exe --build -j 2 -Wno-fatal -Wno-lint -Wno-style --x-assign unique --x-initial unique \
		-O3 -CFLAGS "-O1 -std=c++17 -I$PWD/test" --top-module "$mod" -Mdir "$dir" -o "V$mod" \
		$extra $rtl "$PWD/$tb" >"$dir.build.log" 2>&1; then
		echo "$mod: build failed (see $dir.build.log):" >&2
		grep -m5 -E '%Error|error:' "$dir.build.log" >&2 || tail -5 "$dir.build.log" >&2
		broken+=("$mod")
		continue
	fi
	set +e
	out=$("$dir/V$mod" +verilator+seed+1 +verilator+rand+reset+2 2>&1)
	rc=$?
	set -e
	echo "$out" | grep -v '^- ' || true
	line=$(echo "$out" | grep -E '^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -1)
	if [ -z "$line" ]; then
		echo "$mod: exited $rc without its closing line" >&2
		broken+=("$mod")
		continue
	fi
	p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
	total_p=$((total_p + p)) total_f=$((total_f + f))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then broken+=("$mod"); fi
done
if [ ${#broken[@]} -gt 0 ]; then
	echo "hw tests broken: ${broken[*]}" >&2
	total_f=$((total_f + ${#broken[@]}))
fi
echo "hw: $total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
