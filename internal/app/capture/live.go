package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/gopacket"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// LiveOptions are `dxpu pcap capture`'s.
type LiveOptions struct {
	Interface string
	Out       string
	UDPPort   uint16 // dxpu over UDP to or from this port (with EtherType 0x88B5) is what the default filter keeps
	All       bool   // keep every frame (no filter)
	BPF       string // a classic BPF program as `tcpdump -ddd` prints it, instead of the default filter
	Count     int    // stop after this many frames (0: no limit)
	Duration  time.Duration
	Snaplen   int // bytes kept of each frame (0: 65535)
	PcapNG    bool
	// Ready, when set, is called once the socket is bound and filtering:
	// frames sent from then on are captured.
	Ready func()
}

// pollEvery bounds how long a blocked read waits before looking at ctx.
const pollEvery = 100 * time.Millisecond

// maxSnaplen is the longest record Live keeps (pcap's usual limit).
const maxSnaplen = 262144

// Live captures frames on an interface (AF_PACKET: Linux, root or
// CAP_NET_RAW) into o.Out until ctx ends, o.Count frames or o.Duration;
// the frames the kernel queued before the end are written too, and the
// summary line names what the kernel dropped. By default only dxpu frames
// are kept (EtherType 0x88B5, or IPv4/UDP to or from o.UDPPort, untagged
// or with one 802.1Q tag the NIC left in place); on loopback each frame is
// kept once, as it leaves. Frames are kept as the wire carries them: a UDP
// segmentation-offload send is written as the datagrams it leaves as, and
// a checksum left to the NIC is filled in (gso.go).
func Live(ctx context.Context, o LiveOptions, stdout io.Writer) error {
	if o.Interface == "" || o.Out == "" {
		return apperr.Usage(errors.New("capture: --interface and --out are required"))
	}
	if err := notStdout("capture", "--out", o.Out); err != nil {
		return err
	}
	switch {
	case o.Count < 0:
		return apperr.Usage(units.Errorf("capture: --count %d: want 0 (no limit) or more", o.Count))
	case o.Duration < 0:
		return apperr.Usage(units.Errorf("capture: --duration %v: want 0 (until Ctrl-C) or more", o.Duration))
	case o.Snaplen < 0 || o.Snaplen > maxSnaplen:
		return apperr.Usage(units.Errorf("capture: --snaplen %d: want 0 (65535) up to %d", o.Snaplen, maxSnaplen))
	}
	if o.All && o.BPF != "" {
		return apperr.Usage(errors.New("capture: --all and --bpf exclude each other"))
	}
	var filter []unix.SockFilter
	switch {
	case o.BPF != "":
		var err error
		if filter, err = ParseBPF(o.BPF); err != nil {
			return apperr.Usage(fmt.Errorf("capture: --bpf: %w", err))
		}
	case !o.All:
		filter = dxpuFilter(o.UDPPort)
	}
	snap := o.Snaplen
	if snap == 0 {
		snap = 65535
	}
	ifi, err := net.InterfaceByName(o.Interface)
	if err != nil {
		return apperr.Usage(fmt.Errorf("capture: --interface: %w", err))
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("capture: AF_PACKET socket (needs root or CAP_NET_RAW): %w", err)
	}
	defer unix.Close(fd)
	// Protocol 0 receives nothing until the bind below, so no frame gets in
	// before the filter is attached.
	if filter != nil {
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return fmt.Errorf("capture: attaching the BPF filter: %w", err)
		}
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1) // VLAN tags the NIC took off
	// A virtio_net_hdr before each frame says which frames are offload
	// super-frames and which checksums are left to the NIC (gso.go).
	vnet := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1) == nil
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	tv := unix.NsecToTimeval(int64(pollEvery))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fmt.Errorf("capture: binding to %s: %w", o.Interface, err)
	}
	w, err := createOutput(o.Out, pcapio.WriterOptions{PcapNG: o.PcapNG, Nanos: true, Snaplen: uint32(snap)})
	if err != nil {
		return err
	}
	defer w.abort()
	if o.Ready != nil {
		o.Ready()
	}
	var deadline time.Time
	if o.Duration > 0 {
		deadline = time.Now().Add(o.Duration)
	}
	loopback := ifi.Flags&net.FlagLoopback != 0
	undescribed := 0
	// The end of ctx (Ctrl-C) is the normal end of a capture; after a
	// failed read what was captured is kept too (whole records: a live
	// capture cannot be taken again), and the error says so.
	n, err := readLive(ctx, fd, w.Writer, o.Count, deadline, loopback, vnet, snap, &undescribed)
	if cerr := w.commit(); err == nil {
		err = cerr
	} else if cerr == nil && n > 0 {
		err = fmt.Errorf("%w (the %d frames before it are in %s)", err, n, o.Out)
	}
	if err != nil {
		return err
	}
	drops := "kernel drops unknown"
	if st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		drops = fmt.Sprintf("%d dropped by the kernel", st.Drops)
	}
	if undescribed > 0 {
		drops += fmt.Sprintf(", %d offload frames it could not describe", undescribed)
	}
	fmt.Fprintf(stdout, "%s: %d frames captured on %s (%s)\n", o.Out, n, o.Interface, drops)
	return nil
}

// readLive writes frames to w until ctx ends, count frames or deadline;
// then it drains what the socket holds (up to count). With vnet, each
// frame comes behind a virtio_net_hdr: super-frames are written as the
// datagrams they leave as, and checksums left to the NIC are filled in.
func readLive(ctx context.Context, fd int, w *pcapio.Writer, count int, deadline time.Time, loopback, vnet bool, snap int, undescribed *int) (int, error) {
	buf := make([]byte, maxSnaplen)
	oob := make([]byte, 256)
	frame := make([]byte, 0, len(buf)+4)
	scratch := make([]byte, 0, len(buf))
	hdrLen := 0
	if vnet {
		hdrLen = vnetHdrLen
	}
	n := 0
	var ci time.Time
	write := func(f []byte, length int) error {
		if count > 0 && n >= count {
			return nil
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ci, CaptureLength: len(f), Length: length}, f); err != nil {
			return err
		}
		n++
		return nil
	}
	draining := false
	for count == 0 || n < count {
		flags := 0
		if !draining && (ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline))) {
			draining = true
		}
		if draining {
			flags = unix.MSG_DONTWAIT
		}
		m, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, flags|unix.MSG_TRUNC)
		if err != nil {
			if vnet && errors.Is(err, unix.EINVAL) {
				// An offload frame virtio_net_hdr has no words for (a
				// tunnel's GSO): the kernel dropped it from this socket.
				*undescribed++
				continue
			}
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				if draining {
					return n, nil
				}
				continue
			}
			return n, fmt.Errorf("capture: reading: %w", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && loopback && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // on lo each frame also arrives: keep that copy
		}
		if m < hdrLen {
			continue
		}
		var tci uint16
		var tagged bool
		ci, tci, tagged = control(oob[:oobn])
		if ci.IsZero() {
			ci = time.Now()
		}
		var vh vnetHdr
		if vnet {
			vh = parseVnetHdr(buf)
		}
		length := m - hdrLen // MSG_TRUNC: the frame's real length
		have := min(m, len(buf)) - hdrLen
		raw := buf[hdrLen : hdrLen+have]
		frame = append(frame[:0], raw...)
		shift := 0
		if tagged && have >= 12 {
			// The NIC took the 802.1Q tag off: put it back where it was.
			frame = append(frame[:12], append([]byte{0x81, 0x00, byte(tci >> 8), byte(tci)}, raw[12:]...)...)
			length += 4
			shift = 4
		}
		if vh.gsoType == vnetGSOUDPL4 {
			if split, err := splitUDPGSO(frame, length, vh.gsoSize, snap, scratch, write); split || err != nil {
				if err != nil {
					return n, err
				}
				continue
			}
			if gsoUndescribed(frame, vh.gsoSize) {
				// A super-frame whose cut is unknown (bad headers, no
				// gso_size): counted with those the kernel dropped.
				*undescribed++
				continue
			}
		}
		if len(frame) == length {
			finishChecksum(frame, vh, shift)
		}
		if len(frame) > snap {
			frame = frame[:snap]
		}
		if err := write(frame, length); err != nil {
			return n, err
		}
	}
	return n, nil
}

// control reads the timestamp and the VLAN tag the kernel passes along.
func control(oob []byte) (ts time.Time, tci uint16, tagged bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return ts, 0, false
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16:
			ts = time.Unix(int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:])))
		case m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 20:
			// struct tpacket_auxdata: status u32, len u32, snaplen u32, mac u16, net u16, vlan_tci u16, vlan_tpid u16
			status := binary.NativeEndian.Uint32(m.Data)
			tci = binary.NativeEndian.Uint16(m.Data[16:])
			tagged = status&unix.TP_STATUS_VLAN_VALID != 0
		}
	}
	return ts, tci, tagged
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// dxpuFilter is the default capture filter: EtherType 0x88B5, or IPv4 UDP
// to or from port, untagged or behind one 802.1Q tag left in the frame
// (frames whose tag the NIC took off are matched untagged).
func dxpuFilter(port uint16) []unix.SockFilter {
	p := uint32(port)
	ldh := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: 0x28, K: k} }
	ldb := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: 0x30, K: k} }
	ldxIHL := func(off uint32) unix.SockFilter { return unix.SockFilter{Code: 0xb1, K: off} } // ldxb 4*([off]&0xf)
	ldhX := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: 0x48, K: k} }       // ldh [x+k]
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter { return unix.SockFilter{Code: 0x15, Jt: jt, Jf: jf, K: k} }
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: 0x06, K: k} }
	// Untagged at base 14, tagged at base 18: EtherType at base-2.
	block := func(base uint32, next uint8) []unix.SockFilter {
		// 0 ldh [base-2]; 1 jeq 0x88b5 accept; 2 jeq 0x0800 else next; 3 ldb proto; 4 jeq 17 else drop
		// 5 ldxb ihl; 6 ldh [x+base]; 7 jeq port accept; 8 ldh [x+base+2]; 9 jeq port accept else drop
		return []unix.SockFilter{
			ldh(base - 2), jeq(0x88b5, 100, 0), jeq(0x0800, 0, next),
			ldb(base + 9), jeq(17, 0, 101),
			ldxIHL(base), ldhX(base), jeq(p, 100, 0), ldhX(base + 2), jeq(p, 100, 101),
		}
	}
	var f []unix.SockFilter
	f = append(f, ldh(12), jeq(0x8100, 10, 0)) // tagged: skip the untagged block
	f = append(f, block(14, 200)...)
	f = append(f, block(18, 201)...)
	f = append(f, ret(0x40000), ret(0))
	// Resolve the placeholders: 100 accept, 101 drop, 200/201 the end of
	// the untagged block (drop: it is not IPv4 nor dxpu).
	accept, drop := len(f)-2, len(f)-1
	for i := range f {
		if f[i].Code != 0x15 {
			continue
		}
		for _, j := range []*uint8{&f[i].Jt, &f[i].Jf} {
			switch *j {
			case 100:
				*j = uint8(accept - i - 1)
			case 101, 200, 201:
				*j = uint8(drop - i - 1)
			}
		}
	}
	return f
}

// ParseBPF reads a classic BPF program as `tcpdump -ddd EXPR` prints it:
// the instruction count, then one "code jt jf k" line per instruction
// (commas or newlines between instructions).
func ParseBPF(s string) ([]unix.SockFilter, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	if len(fields) == 0 {
		return nil, errors.New("empty program")
	}
	n, err := strconv.Atoi(strings.TrimSpace(fields[0]))
	if err != nil || n < 1 || n > 4096 || len(fields) != n+1 {
		return nil, fmt.Errorf("first word %q must be the instruction count (%d lines follow)", fields[0], len(fields)-1)
	}
	out := make([]unix.SockFilter, n)
	for i, line := range fields[1:] {
		w := strings.Fields(line)
		if len(w) != 4 {
			return nil, fmt.Errorf("instruction %d: %q, want \"code jt jf k\"", i+1, line)
		}
		var v [4]uint64
		for j, x := range w {
			bits := []int{16, 8, 8, 32}[j]
			if v[j], err = strconv.ParseUint(x, 10, bits); err != nil {
				return nil, fmt.Errorf("instruction %d: %q: %w", i+1, x, err)
			}
		}
		out[i] = unix.SockFilter{Code: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])}
	}
	return out, nil
}
