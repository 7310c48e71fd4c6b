#!/usr/bin/env bash
# Generic Yosys synthesis of the bridge top: no vendor library, so the
# figures are technology-independent (2-input gates and muxes after abc,
# flip-flops, memories kept whole as block-RAM candidates). Timing closure
# needs a vendor flow (Vivado, Quartus, nextpnr with a device database):
# none is installed here.
#
# usage: synth.sh OUTDIR TOP "PARAM=VALUE ..." FILE...
set -euo pipefail
out=$1 top=$2 params=$3
shift 3
mkdir -p "$out"
# Yosys 0.23 lacks package imports and return: read rewritten copies.
srcs=$(python3 "$(dirname "$0")/yosys_compat.py" "$out/src" "$@")
{
	echo "read_verilog -sv" $srcs
	# Parameters of the top are set while elaborating (a later chparam
	# would refer to submodules hierarchy already replaced).
	echo "hierarchy -check -top $top$(for p in $params; do printf ' -chparam %s %s' "${p%%=*}" "${p#*=}"; done)"
	# Coarse synthesis keeps memories as \$mem_v2 cells (memory -nomap);
	# the rest is mapped to generic gates and flip-flops.
	echo "synth -top $top -flatten -run :fine"
	echo "opt -fast -full"
	echo "techmap"
	echo "opt -fast"
	echo "abc -g AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"
	echo "opt_clean"
	echo "tee -q -o $out/stat.txt stat"
	echo "write_json $out/netlist.json"
} >"$out/synth.ys"
if ! yosys -q -l "$out/yosys.log" "$out/synth.ys" >/dev/null; then
	echo "synth: yosys failed for $top ($params); see $out/yosys.log:" >&2
	grep -m3 -i error "$out/yosys.log" >&2 || tail -3 "$out/yosys.log" >&2
	exit 1
fi
python3 "$(dirname "$0")/synth_report.py" "$out/netlist.json" "$top"
