#!/bin/sh
# Checks that `go generate ./xdp/...` reproduces the committed bpf2go output
# byte for byte. Run from the repository root; needs clang and llvm-strip
# (Debian: apt-get install clang llvm). Leaves the tree as it found it.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files="xdpswitch_bpfel.go xdpswitch_bpfel.o"
for f in $files; do cp "$f" "$tmp/$f"; done
(cd .. && go generate ./xdp/...)
status=0
for f in $files; do
	if ! cmp -s "$f" "$tmp/$f"; then
		echo "xdp/$f: go generate output differs from the committed file" >&2
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	for f in $files; do cp "$tmp/$f" "$f"; done
	echo "restored the committed files; regenerate with 'go generate ./xdp/...' and commit" >&2
fi
exit $status
