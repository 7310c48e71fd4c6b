#!/bin/sh
# conform.sh: the conformance kit (dxpu conform --role gpu, UDP, unkeyed)
# against the simulated RTL bridge. The kit is told the timers the
# simulation was built with (hw/Makefile SIM_PARAMS). Arguments go to the kit
# (e.g. --scenario flap-long, --json); HARNESS_ARGS to the harness (e.g.
# "--loss 0.05 -v"). Exit status: the kit's.
set -eu
DXPU=${DXPU:-../bin/dxpu}
SIM=${SIM:-obj_dir/Vdxpu_bridge_gpu}
IUT=${IUT:-127.0.0.121:8855}
KIT=${KIT:-127.0.0.120:8855}
LOG=${LOG:-/tmp/dxpu-hw-conform.$$.log}
# The kit's allowance for real-clock jitter. The simulated bridge keeps its
# timers to 100 us, but a loaded machine can deschedule the simulation for
# 100-200 ms (seen under a load average of 40, even under chrt), which the
# kit would count against the bridge (LNK-1).
SLACK=${SLACK:-250ms}
RT=""
if chrt -r 1 true 2>/dev/null; then RT="chrt -r 1"; fi
$RT "$SIM" --listen "$IUT" --peer "$KIT" --mem-base 0x2000000000 --mem-size 1048576 --encap mixed ${HARNESS_ARGS:-} 2>"$LOG" &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null; cat "$LOG" >&2; rm -f "$LOG"' EXIT
rc=0
"$DXPU" conform --role gpu --peer "udp:$IUT" --local "$KIT" --addr 0x2000000000 --size 4096 \
    --keepalive 50ms --dead-after 1s --completion-timeout 250ms --max-rto 200ms --slack "$SLACK" "$@" || rc=$?
exit $rc
