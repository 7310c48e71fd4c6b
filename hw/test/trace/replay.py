#!/usr/bin/env python3
"""Replay a trace of host-side traffic into a GPU-side dxpu bridge over UDP
and record, normalised, the TLP frames it answers with.

The replayer plays the host side of an unkeyed pair (docs/protocol.md):
handshake, then each step of the trace (memory writes and reads, several
TLPs in one frame, a duplicated frame, two frames swapped so the bridge
sees a hole first), in lock step: a step ends once the bridge acknowledged
every TLP of it and completed every read. It acknowledges the bridge's
TLP frames at once and announces infinite credits, so no timer of the
bridge's decides what it sends; frames that timers do decide (standalone
ACK, NAK, CREDIT, KEEPALIVE) are not recorded.

Each TLP the bridge sends becomes one line: the frame that would carry it
alone (N 1, its length entry, its bytes; how many TLPs share a frame
depends on what the bridge had queued when it framed, a matter of timing),
from the dxpu header on in hex, with:
  - Seq and Ack rewritten relative to the bridge's and the replayer's ISN
    (both random per session);
  - the credit fields (bytes 20-39: limits and infinite mask) zeroed: they
    count the bridge's configured buffer sizes, which are not the protocol's;
every other byte (version and flags, type, pair, N, body length, SACK,
length table, TLP bytes) is kept. A retransmission must repeat its
original bytes (SEQ-2) and is checked, not recorded again.

usage: replay.py --peer IP:PORT --local IP:PORT --trace FILE [--pair N] [--out FILE]
Exit 0 with the record written; 1 with one line naming what went wrong.
"""
import argparse
import os
import random
import select
import socket
import struct
import sys
import time

MSG_TLP, MSG_ACK, MSG_NAK, MSG_CREDIT, MSG_CONTROL = 1, 2, 3, 4, 5
HELLO, HELLO_ACK, KEEPALIVE, KEEPALIVE_ACK, RESET = 1, 2, 3, 4, 5
F_ACK, F_CREDIT, F_SACK = 1, 2, 4
REQUESTER = 0x0100  # 01:00.0, the host's requester ID on the wire


class Fail(Exception):
    pass


def seq_lt(a, b):
    return ((a - b) & 0xFFFFFFFF) >> 31 == 1


def header(typ, flags, pair, n, body_len, seq, ack, sack=0):
    # Credits: every type infinite (mask 0x3f), limits 0.
    return struct.pack(">BB3sBHIII HHHBB III", 0x10 | flags, typ, pair.to_bytes(3, "big"), n, body_len,
                       seq, ack, sack, 0, 0, 0, 0x3F, 0, 0, 0, 0)


def mwr(addr, data, tag):
    dws = len(data) // 4
    last = 0xF if dws > 1 else 0
    h = struct.pack(">BBHHBBQ", 0x60, 0, dws & 0x3FF, REQUESTER, tag, (last << 4) | 0xF, addr)
    return h + data


def mrd(addr, length, tag):
    dws = (length + 3) // 4
    last = 0xF if dws > 1 else 0
    return struct.pack(">BBHHBBQ", 0x20, 0, dws & 0x3FF, REQUESTER, tag, (last << 4) | 0xF, addr)


def parse_trace(path):
    steps, batch = [], None
    with open(path) as f:
        for no, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            where = f"{path}:{no}"
            op = words[0]
            try:
                if op == "write" and len(words) == 3:
                    data = bytes.fromhex(words[2])
                    if not data or len(data) % 4:
                        raise ValueError("data must be whole DWs")
                    tlp = ("write", int(words[1], 0), data)
                elif op == "read" and len(words) == 3:
                    tlp = ("read", int(words[1], 0), int(words[2], 0))
                elif op in ("batch", "end", "dup", "swap") and len(words) == 1:
                    tlp = None
                else:
                    raise ValueError(f"unknown step {line.strip()!r}")
            except ValueError as e:
                raise Fail(f"{where}: {e}")
            if op == "batch":
                batch = []
            elif op == "end":
                if not batch:
                    raise Fail(f"{where}: empty batch")
                steps.append(("frame", batch, where))
                batch = None
            elif op in ("dup", "swap"):
                steps.append((op, None, where))
            elif batch is not None:
                batch.append(tlp)
            else:
                steps.append(("frame", [tlp], where))
    return steps


class Replayer:
    def __init__(self, sock, peer, pair, out):
        self.sock, self.peer, self.pair, self.out = sock, peer, pair, out
        self.session = random.getrandbits(32) | 1
        self.isn = random.getrandbits(32)
        self.nxt = self.isn          # our next sequence number
        self.peer_session = 0
        self.peer_isn = None
        self.rcv = None              # next sequence number we expect from the bridge
        self.peer_ack = None         # the bridge's cumulative ack of our TLPs
        self.seen = {}               # the bridge's TLP frames by Seq, for SEQ-2
        self.tag = 0
        self.reads = {}              # tag -> bytes still owed
        self.data = {}               # tag -> bytes returned
        self.want = {}               # tag -> bytes expected (from the writes)
        self.mem = {}
        self.frames = []             # our TLP frames as sent, for dup and swap
        self.up = False

    def send(self, b):
        self.sock.sendto(b, self.peer)

    def control(self, ctype, arg):
        body = struct.pack(">BBBBII", ctype, 1, 1, arg, self.session, self.peer_session)
        if ctype in (HELLO, HELLO_ACK):
            # window 256, max TLP 4116, our ISN, every credit infinite
            body += struct.pack(">HHI HHHBB III", 256, 4116, self.isn, 0, 0, 0, 0x3F, 0, 0, 0, 0)
        flags = F_ACK | F_CREDIT if self.up else 0
        self.send(header(MSG_CONTROL, flags, self.pair, 0, len(body), 0, self.rcv or 0) + body)

    def ack(self):
        self.send(header(MSG_ACK, F_ACK | F_CREDIT, self.pair, 0, 0, 0, self.rcv))

    def receive(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return
        b, _ = self.sock.recvfrom(65536)
        if len(b) < 40 or b[0] >> 4 != 1:
            raise Fail(f"the bridge sent a frame that is not dxpu version 1 ({len(b)} bytes)")
        flags, typ = b[0] & 0xF, b[1]
        n, body_len = b[5], struct.unpack(">H", b[6:8])[0]
        seq, ack, sack = struct.unpack(">III", b[8:20])
        if 40 + body_len != len(b):
            raise Fail(f"the bridge sent a frame of {len(b)} bytes whose body length says {40 + body_len}")
        body = b[40:]
        if typ == MSG_CONTROL:
            ctype, _, role, arg, sess, peer = struct.unpack(">BBBBII", body[:12])
            if ctype in (HELLO, HELLO_ACK):
                if role != 2:
                    raise Fail(f"the bridge's HELLO names role {role}, want 2 (GPU side)")
                if self.peer_session and sess != self.peer_session:
                    raise Fail("the bridge restarted its session during the trace")
                self.peer_session = sess
                self.peer_isn = struct.unpack(">I", body[16:20])[0]
                if self.rcv is None:
                    self.rcv = self.peer_isn
                if peer == self.session:
                    self.up = True
                if ctype == HELLO or not self.up:
                    self.control(HELLO_ACK, 8)
            elif ctype == KEEPALIVE:
                self.control(KEEPALIVE_ACK, arg)
            elif ctype == RESET:
                raise Fail(f"the bridge sent a RESET (reason {arg})")
        if not self.up:
            return
        if flags & F_ACK:
            if self.peer_ack is None or seq_lt(self.peer_ack, ack):
                self.peer_ack = ack
        if typ != MSG_TLP:
            return
        if seq in self.seen:
            if self.seen[seq] != b:
                raise Fail(f"retransmission of Seq +{(seq - self.peer_isn) & 0xFFFFFFFF} differs from the original (SEQ-2)")
        elif seq == self.rcv:
            self.seen[seq] = b
            self.record(b)
            self.rcv = (seq + n) & 0xFFFFFFFF
            off = 40 + 2 * n
            for i in range(n):
                ln = struct.unpack(">H", b[40 + 2 * i:42 + 2 * i])[0]
                self.completion(b[off:off + ln])
                off += ln
        self.ack()

    def record(self, b):
        # One line per TLP, as the frame that would carry it alone: how many
        # TLPs share a frame depends on what the bridge had queued when it
        # framed (timing), not on the protocol, so packing is not compared.
        seq, ack = struct.unpack(">II", b[8:16])
        n = b[5]
        off = 40 + 2 * n
        for i in range(n):
            ln = struct.unpack(">H", b[40 + 2 * i:42 + 2 * i])[0]
            t = b[off:off + ln]
            off += ln
            norm = bytearray(b[:40])
            norm[5] = 1
            norm[6:8] = struct.pack(">H", 2 + ln)
            norm[8:16] = struct.pack(">II", (seq + i - self.peer_isn) & 0xFFFFFFFF, (ack - self.isn) & 0xFFFFFFFF)
            norm[20:40] = bytes(20)
            self.out.append("tlp " + (bytes(norm) + struct.pack(">H", ln) + t).hex())

    def completion(self, t):
        if len(t) < 12 or t[0] not in (0x0A, 0x4A):
            raise Fail(f"the bridge sent a TLP that is not a completion: {t[:4].hex()}")
        status = t[6] >> 5
        bc = ((t[6] & 0xF) << 8 | t[7]) or 4096
        tag = t[10]
        if tag not in self.reads:
            raise Fail(f"completion for tag {tag}, which no read outstanding has")
        if status != 0:
            raise Fail(f"completion status {status} for tag {tag}")
        dws = (t[2] & 3) << 8 | t[3]
        self.data[tag] += t[12:12 + 4 * dws]
        if bc <= 4 * dws:
            del self.reads[tag]

    def wait(self, what, cond, timeout=10.0):
        end = time.monotonic() + timeout
        while not cond():
            left = end - time.monotonic()
            if left <= 0:
                raise Fail(f"timed out waiting for {what}")
            self.receive(min(left, 0.05))
            if not self.up:
                self.control(HELLO, 8)

    def handshake(self, timeout):
        self.control(HELLO, 8)
        self.wait(f"the handshake with {self.peer[0]}:{self.peer[1]}", lambda: self.up, timeout)
        self.out.append("up")

    def build(self, tlps):
        n = len(tlps)
        lens = b"".join(struct.pack(">H", len(t)) for t in tlps)
        body = lens + b"".join(tlps)
        f = header(MSG_TLP, F_ACK | F_CREDIT, self.pair, n, len(body), self.nxt, self.rcv) + body
        self.nxt = (self.nxt + n) & 0xFFFFFFFF
        return f

    def tlps(self, ops):
        out = []
        for op in ops:
            if op[0] == "write":
                _, addr, data = op
                out.append(mwr(addr, data, 0))
                for i, x in enumerate(data):
                    self.mem[addr + i] = x
            else:
                _, addr, length = op
                tag = self.tag
                self.tag = (self.tag + 1) % 256
                self.reads[tag] = length
                self.data[tag] = b""
                self.want[tag] = bytes(self.mem.get(addr + i, 0) for i in range(length))
                out.append(mrd(addr, length, tag))
        return out

    def settle(self, where):
        self.wait(f"{where}: acknowledgement of Seq +{(self.nxt - self.isn) & 0xFFFFFFFF}",
                  lambda: self.peer_ack == self.nxt)
        self.wait(f"{where}: completions of {sorted(self.reads)}", lambda: not self.reads)
        for tag, want in self.want.items():
            if self.data[tag][:len(want)] != want:
                raise Fail(f"{where}: read with tag {tag} returned {self.data[tag].hex()}, wrote {want.hex()}")
        self.want.clear()
        self.out.append(f"acked +{(self.nxt - self.isn) & 0xFFFFFFFF}")

    def run(self, steps, timeout):
        self.handshake(timeout)
        i = 0
        while i < len(steps):
            kind, ops, where = steps[i]
            if kind == "frame":
                f = self.build(self.tlps(ops))
                self.frames.append(f)
                self.send(f)
            elif kind == "dup":
                if not self.frames:
                    raise Fail(f"{where}: dup before any frame")
                self.send(self.frames[-1])
            elif kind == "swap":
                if i + 2 >= len(steps) or steps[i + 1][0] != "frame" or steps[i + 2][0] != "frame":
                    raise Fail(f"{where}: swap wants two frames after it")
                a = self.build(self.tlps(steps[i + 1][1]))
                b = self.build(self.tlps(steps[i + 2][1]))
                self.frames += [a, b]
                self.send(b)
                # The bridge holds b behind the hole; then the hole fills.
                end = time.monotonic() + 0.05
                while time.monotonic() < end:
                    self.receive(0.01)
                self.send(a)
                i += 2
            self.settle(where)
            i += 1


def addr(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--local", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--pair", type=int, default=1)
    ap.add_argument("--out", default="-")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds for the handshake")
    a = ap.parse_args()
    try:
        steps = parse_trace(a.trace)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(addr(a.local))
        out = []
        Replayer(sock, addr(a.peer), a.pair, out).run(steps, a.timeout)
    except (Fail, OSError) as e:
        print(f"replay: {e}", file=sys.stderr)
        sys.exit(1)
    text = "\n".join(out) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
