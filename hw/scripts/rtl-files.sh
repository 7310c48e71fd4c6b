#!/usr/bin/env bash
# The synthesizable RTL in compile order: packages first, then the rest
# sorted (every tool here reads them in this one order).
cd "$(dirname "$0")/.."
ls rtl/*_pkg.sv 2>/dev/null | sort
ls rtl/*.sv 2>/dev/null | grep -v '_pkg\.sv$' | sort
