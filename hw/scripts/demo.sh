#!/bin/sh
# demo.sh: a host-side dxpu bridge (dxpu bridge --role host, unkeyed) paired
# with the simulated RTL GPU-side bridge; dxpu nettlp write/read (libtlp's
# dma_write/dma_read) move random data through the pair into the memory
# behind the RTL bridge and back, and the bytes are compared. Runs without
# loss and with LOSS (default 0.05) of the frames lost each way by the
# harness. Meanwhile the simulated device makes its own requests (the RQ/RC
# path, wire tags): 64 writes and reads of host memory served by
# 'dxpu nettlp serve' behind the host bridge, checked by the harness.
# Exit status 0 only if every read returned exactly what was written.
set -eu
DXPU=${DXPU:-../bin/dxpu}
SIM=${SIM:-obj_dir/Vdxpu_bridge_gpu}
GPU=${GPU:-127.0.0.131:8855}
HOST=${HOST:-127.0.0.130:8855}
NT_REMOTE=${NT_REMOTE:-127.0.0.133}   # the host bridge's NetTLP side (libtlp's -r)
NT_LOCAL=${NT_LOCAL:-127.0.0.134}     # libtlp's own address (-l)
NT_HOSTMEM=${NT_HOSTMEM:-127.0.0.135} # host memory for the device's DMA (dxpu nettlp serve)
BASE=0x2000000000
SIZE=${SIZE:-8192}
LOSS=${LOSS:-0.05}
TMP=$(mktemp -d)
# The simulation is a real-time peer: on a loaded machine give it (and the
# host bridge) the CPU when they need it.
RT=""
if chrt -r 1 true 2>/dev/null; then RT="chrt -r 1"; fi
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    pids=""
}
trap 'cleanup; rm -rf "$TMP"' EXIT

nt() { "$DXPU" nettlp "$@" --remote "$NT_REMOTE" --local "$NT_LOCAL"; }
# hexdump prints the bytes of a 'dxpu nettlp read' dump as one hex string
hexdump() { awk '/^[0-9a-f]+  /{for(i=2;i<=NF;i++){if($i ~ /^\|/)break; printf "%s",$i}} END{print ""}'; }

run() {
    loss=$1
    $RT "$DXPU" nettlp serve --addr "$NT_HOSTMEM" --mem-size 1M >"$TMP/serve.log" 2>&1 &
    pids="$pids $!"
    # The host memory must be there before the link comes up: the device's
    # first DMA request goes out at link-up, and a request the host bridge
    # hands to a port nobody has bound yet is lost (UDP), so the RTL answers
    # it CA after CompletionTimeout. Under load serve took 160 ms to bind,
    # after the link was up.
    i=0
    until grep -q 'nettlp target serving' "$TMP/serve.log"; do
        i=$((i + 1))
        if [ $i -gt 200 ]; then echo "demo: dxpu nettlp serve not serving after 20 s" >&2; cat "$TMP/serve.log" >&2; exit 1; fi
        sleep 0.1
    done
    $RT "$SIM" --listen "$GPU" --peer "$HOST" --mem-base "$BASE" --mem-size 1048576 --encap mixed --loss "$loss" \
        --dma 64 2>"$TMP/sim.log" &
    pids="$pids $!"
    $RT "$DXPU" bridge --role host --listen "$HOST" --peer "$GPU" --pcie "nettlp:$NT_REMOTE:$NT_LOCAL:$NT_HOSTMEM" \
        --insecure-no-keys --keepalive 50ms --dead-after 1s >"$TMP/host.log" 2>&1 &
    pids="$pids $!"
    i=0
    until nt read --addr "$BASE" --size 4 --timeout 200ms >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then echo "demo: no link through the RTL bridge after 20 s (loss $loss)" >&2; cat "$TMP/sim.log" "$TMP/host.log" >&2; exit 1; fi
        sleep 0.1
    done
    ok=0
    # aligned, and misaligned (split completions with Lower Address 4;
    # small, as libtlp's fixed-size chunks of a misaligned run would cross
    # a 4 KiB boundary, which PCIe forbids)
    for case in "0 $SIZE" "0x3000 $SIZE" "0x1004 1000"; do
        set -- $case
        addr=$(printf '0x%x' $((BASE + $1)))
        data=$(head -c "$2" /dev/urandom | od -An -v -tx1 | tr -d ' \n')
        nt write --addr "$addr" --hex "$data" --mps 256 --timeout 3s >/dev/null
        got=$(nt read --addr "$addr" --size "$2" --mrrs 256 --timeout 3s | hexdump)
        if [ "$got" != "$data" ]; then
            echo "demo: loss $loss: read at $addr differs from what was written" >&2
            ok=1
        fi
    done
    i=0
    until grep -q 'harness: dma:' "$TMP/sim.log"; do
        i=$((i + 1))
        if [ $i -gt 200 ]; then echo "demo: loss $loss: the device's DMA did not finish in 20 s" >&2; ok=1; break; fi
        sleep 0.1
    done
    if grep -q 'harness: dma: .*failed' "$TMP/sim.log"; then ok=1; fi
    cleanup
    stats=$(tail -1 "$TMP/sim.log")
    if [ $ok -eq 0 ]; then
        echo "demo: loss $loss: $((2 * SIZE + 1000)) bytes (aligned and misaligned) written and read back byte-exact through the RTL bridge"
    fi
    grep 'harness: dma:' "$TMP/sim.log" | sed 's/^/  /' || true
    echo "  $stats"
    return $ok
}

rc=0
run 0 || rc=1
run "$LOSS" || rc=1
exit $rc
