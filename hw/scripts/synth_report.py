#!/usr/bin/env python3
"""Summarise a Yosys JSON netlist: cells, flip-flops and block-RAM bits.

The netlist is the generic one hw/scripts/synth.sh writes: gates after abc,
flip-flops as $_DFF*/$_SDFF*/... cells and memories kept as $mem_v2 cells
(what a vendor flow would put in block RAM when their read port is
clocked). Prints one line of figures, or with --json one object.
"""
import json
import math
import sys

# Aspect ratios of an 18 Kb block RAM (the common FPGA primitive): a
# memory's count is the fewest blocks any one ratio needs.
BRAM18 = [(512, 36), (1024, 18), (2048, 9), (4096, 4), (8192, 2), (16384, 1)]


def blocks(depth, width):
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in BRAM18)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    as_json = "--json" in sys.argv
    if len(args) != 2:
        print("usage: synth_report.py NETLIST.json TOP [--json]", file=sys.stderr)
        sys.exit(2)
    path, top = args
    try:
        with open(path) as f:
            net = json.load(f)
    except (OSError, ValueError) as e:
        print(f"synth_report: {path}: {e}", file=sys.stderr)
        sys.exit(1)
    mod = net.get("modules", {}).get(top)
    if mod is None:
        print(f"synth_report: {path}: no module {top} (flattened top expected)", file=sys.stderr)
        sys.exit(1)
    cells = ffs = logic = 0
    mems = []
    for name, c in mod["cells"].items():
        t = c["type"]
        cells += 1
        if t.startswith("$mem"):
            p = c["parameters"]
            size, width = int(p["SIZE"], 2), int(p["WIDTH"], 2)
            # A memory whose read ports are all clocked maps to block RAM;
            # an asynchronous read port needs LUT RAM or flip-flops.
            rdclk = int(p.get("RD_CLK_ENABLE", "1"), 2)
            nrd = int(p.get("RD_PORTS", "1"), 2)
            sync = rdclk == (1 << nrd) - 1 if nrd else True
            # Below 1 Kbit a vendor tool puts even a clocked memory in LUT
            # RAM: count it with the small ones, not as block RAM.
            sync = sync and size * width >= 1024
            mems.append({"name": name.lstrip("\\"), "depth": size, "width": width,
                         "bits": size * width, "sync_read": sync,
                         "bram18": blocks(size, width) if sync else 0})
        elif t.startswith(("$_DFF", "$_SDFF", "$_DFFE", "$_ALDFF", "$_DFFSR", "$_SR_", "$_DLATCH")):
            ffs += 1
        else:
            logic += 1
    bram_bits = sum(m["bits"] for m in mems if m["sync_read"])
    small_bits = sum(m["bits"] for m in mems if not m["sync_read"])
    out = {"top": top, "cells": cells, "logic_cells": logic, "flip_flops": ffs,
           "memories": len(mems), "bram_bits": bram_bits, "bram18_blocks": sum(m["bram18"] for m in mems),
           "small_memory_bits": small_bits, "memory_list": mems}
    if as_json:
        print(json.dumps(out))
        return
    print(f"{top}: cells {cells} (logic {logic}, flip-flops {ffs}, memories {len(mems)}), "
          f"block-RAM bits {bram_bits} ({out['bram18_blocks']} x 18Kb), LUT-RAM or flip-flop memory bits {small_bits}")
    for m in mems:
        kind = "block RAM" if m["sync_read"] else "LUT RAM/flip-flops: asynchronous read or under 1 Kbit"
        print(f"  memory {m['name']}: {m['depth']} x {m['width']} = {m['bits']} bits ({kind})")


if __name__ == "__main__":
    main()
