#!/usr/bin/env bash
# Cross-builds dxpu for the Arm cores of DPUs and SmartNICs (linux/arm64)
# and checks what can be checked on an amd64 machine:
#
#   1. every package and the dxpu binary build for GOARCH=arm64 with
#      CGO_ENABLED=0, and the binary is an AArch64 ELF;
#   2. the XDP program is the same committed object on amd64 and arm64:
#      bpf2go's little-endian output (xdp/xdpswitch_bpfel.go and .o) is in
#      the package for both, the object is an EM_BPF little-endian ELF, the
#      arm64 binary embeds it byte for byte, and (as root, with bpffs) the
#      kernel loads and runs it here;
#   3. the C library (cmd/libdxpubridge) builds for arm64 as a c-archive and
#      a c-shared object with CC=aarch64-linux-gnu-gcc, the C example and
#      the bad-input program link against it, and, where qemu-aarch64 is
#      installed, the bad-input program passes on emulated arm64.
#
# Needs for 3 (Debian): apt-get install gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross qemu-user. Without them that part is skipped, or
# fails when DXPU_REQUIRE_PRIVILEGED=1 (as in CI), like every test that
# lacks a tool. Outputs go to $OUT (default: a temporary directory, removed).
set -euo pipefail
cd "$(dirname "$0")/.."

cc_arm64=${CC_ARM64:-aarch64-linux-gnu-gcc}
qemu=${QEMU_AARCH64:-qemu-aarch64}
sysroot=${ARM64_SYSROOT:-/usr/aarch64-linux-gnu}
require=${DXPU_REQUIRE_PRIVILEGED:-0}
if [ -n "${OUT:-}" ]; then
	out=$OUT
	mkdir -p "$out"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi

step() { echo "== cross-build: $*"; }
fail() {
	echo "cross-build: FAIL: $*" >&2
	exit 1
}
# missing reports a missing tool: a skip, or a failure when required.
missing() {
	if [ "$require" = 1 ]; then
		fail "DXPU_REQUIRE_PRIVILEGED=1 but $*"
	fi
	echo "cross-build: skipping: $*"
}
# elf FILE CLASS DATA MACHINE: the ELF header says 64-bit (CLASS 02),
# little-endian (DATA 01) and the machine (e_machine, little-endian hex).
elf() {
	local got
	got=$(od -An -v -tx1 -N20 "$1" | tr -d ' \n')
	[ "${got:0:8}" = 7f454c46 ] || fail "$1 is not an ELF file"
	[ "${got:8:2}" = "$2" ] || fail "$1: ELF class ${got:8:2}, want $2"
	[ "${got:10:2}" = "$3" ] || fail "$1: ELF data ${got:10:2}, want $3 (little-endian)"
	[ "${got:36:4}" = "$4" ] || fail "$1: e_machine ${got:36:4}, want $4"
}
hex() { od -An -v -tx1 "$1" | tr -d ' \n'; }

step "every package for linux/arm64 (CGO_ENABLED=0)"
GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build ./...
GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go vet ./xdp ./bridge ./cmd/libdxpubridge

step "dxpu binary for linux/arm64"
GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -trimpath -o "$out/dxpu-linux-arm64" ./cmd/dxpu
elf "$out/dxpu-linux-arm64" 02 01 b700 # EM_AARCH64 = 183
echo "cross-build: $out/dxpu-linux-arm64: AArch64 ELF, $(wc -c <"$out/dxpu-linux-arm64") bytes"

step "XDP program: one committed little-endian object for amd64 and arm64"
obj=xdp/xdpswitch_bpfel.o
elf "$obj" 02 01 f700 # EM_BPF = 247
for arch in amd64 arm64; do
	files=$(GOOS=linux GOARCH=$arch go list -f '{{join .GoFiles " "}}' ./xdp)
	embeds=$(GOOS=linux GOARCH=$arch go list -f '{{join .EmbedFiles " "}}' ./xdp)
	case " $files " in *" xdpswitch_bpfel.go "*) ;; *) fail "GOARCH=$arch: ./xdp lacks xdpswitch_bpfel.go: $files" ;; esac
	case " $embeds " in *" xdpswitch_bpfel.o "*) ;; *) fail "GOARCH=$arch: ./xdp does not embed xdpswitch_bpfel.o: $embeds" ;; esac
	echo "cross-build: GOARCH=$arch: ./xdp builds xdpswitch_bpfel.go and embeds xdpswitch_bpfel.o"
done
hex "$obj" >"$out/obj.hex"
if ! hex "$out/dxpu-linux-arm64" | grep -q -F -f "$out/obj.hex"; then
	fail "the arm64 dxpu binary does not embed $obj byte for byte"
fi
echo "cross-build: the arm64 dxpu binary embeds $obj ($(wc -c <"$obj") bytes) byte for byte"
if [ "$(id -u)" = 0 ] && mountpoint -q /sys/fs/bpf; then
	# The same object loaded into this kernel and run on the Go switch's
	# corpus (amd64 here; the bytes are the arm64 binary's, checked above).
	go test -count=1 -run '^TestXDPMatchesGoOnCorpus$' ./xdp
else
	missing "loading the XDP object needs root and a mounted /sys/fs/bpf"
fi

step "C library (cmd/libdxpubridge) for linux/arm64"
if ! command -v "$cc_arm64" >/dev/null; then
	missing "no $cc_arm64 (Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
	echo "== cross-build: done (C library for arm64 not built)"
	exit 0
fi
a64=$out/arm64
mkdir -p "$a64"
export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$cc_arm64
go build -buildmode=c-archive -o "$a64/libdxpubridge.a" ./cmd/libdxpubridge
go build -buildmode=c-shared -o "$a64/libdxpubridge.so" ./cmd/libdxpubridge
unset GOOS GOARCH CGO_ENABLED CC
elf "$a64/libdxpubridge.so" 02 01 b700
cflags=(-std=c11 -Wall -Wextra -Werror -Icmd/libdxpubridge/include)
"$cc_arm64" "${cflags[@]}" -pedantic-errors -I"$a64" -c cmd/libdxpubridge/testdata/abicheck.c -o "$a64/abicheck.o"
"$cc_arm64" "${cflags[@]}" -O2 cmd/libdxpubridge/example/pair.c "$a64/libdxpubridge.a" -lpthread -o "$a64/pair"
"$cc_arm64" "${cflags[@]}" -O1 cmd/libdxpubridge/example/badinput.c "$a64/libdxpubridge.a" -lpthread -o "$a64/badinput"
elf "$a64/pair" 02 01 b700
elf "$a64/badinput" 02 01 b700
echo "cross-build: arm64 libdxpubridge.a and .so built; the header matches the exports; pair and badinput link"
if command -v "$qemu" >/dev/null; then
	res=$("$qemu" -L "$sysroot" "$a64/badinput") || fail "badinput on emulated arm64: $res"
	echo "cross-build: on emulated arm64: $(tail -n 1 <<<"$res")"
else
	missing "no $qemu to run the arm64 bad-input program (Debian: apt-get install qemu-user)"
fi
echo "== cross-build: done"
