#!/usr/bin/env bash
# Runs every fuzz target of the module for $FUZZTIME (default 15s) each.
# Targets are discovered from the sources, so a new FuzzXxx is never forgotten.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-15s}
found=0
while IFS= read -r line; do
	file=${line%%:*}
	name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"${line#*:}")
	pkg=./$(dirname "$file")
	found=$((found + 1))
	echo "== fuzz $pkg $name ($fuzztime)"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 100x "$pkg"
done < <(git ls-files '*_test.go' | xargs grep -H -E '^func Fuzz[A-Za-z0-9_]*\(' | sort)
echo "fuzz: $found targets, none failed"
