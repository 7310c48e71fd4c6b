#!/bin/sh
# Regenerates testdata/switch/expected from testdata/pcap (run from the
# repository root after the replay corpus or the switch changes on purpose).
set -eu
for f in testdata/pcap/*.pcap*; do
	go run ./cmd/dxpu replay --pcap "$f" --table testdata/switch/corpus-table.json \
		--mode go --port host --port-addr host=02:5e:00:00:00:01/10.255.0.1 \
		--port-addr gpu=02:5e:00:00:00:02/10.255.0.2 \
		--out "testdata/switch/expected/$(basename "$f").out.pcap" >/dev/null
done
