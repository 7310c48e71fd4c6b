package capture

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// UnsealOptions are `dxpu pcap unseal`'s.
type UnsealOptions struct {
	In, Out string
	KeyLog  string // the bridges' --key-log file
	UDPPort uint16 // dxpu UDP port: datagrams to or from it are dxpu
	// OutUDPPort, when not 0, replaces UDPPort in the output's UDP
	// headers (for tools that know only the default port).
	OutUDPPort uint16
	PcapNG     bool
	Nanos      *bool // the output's timestamp resolution; nil keeps the input's
	JSON       bool  // the summary as one indented UnsealJSON object
}

// UnsealJSON is what `dxpu pcap unseal --json` prints: the counts of its
// text summary, keyed as pcap info's (frames, or frames of a kind).
type UnsealJSON struct {
	In              string `json:"in"`
	Out             string `json:"out"`
	KeyLog          string `json:"key_log"`
	Frames          int    `json:"frames"`           // read from In
	UnsealedFrames  int    `json:"unsealed_frames"`  // sealed frames opened
	HandshakeFrames int    `json:"handshake_frames"` // of those, handshake ones
	CopiedFrames    int    `json:"copied_frames"`    // not sealed: copied as they were
	UnopenedFrames  int    `json:"unopened_frames"`  // sealed frames left out of Out
	Secrets         int    `json:"secrets"`          // lines of the key log
}

// notStdout refuses out "-" (named name, of command cmd): no pcap command
// writes a capture to standard output, and "-" was a file of that name.
func notStdout(cmd, name, out string) error {
	if out == "-" {
		return apperr.Usage(fmt.Errorf(`%s: %s "-": want a file: pcap commands write captures to files, not standard output`, cmd, name))
	}
	return nil
}

// maxReasons bounds the summary lines of frames not opened.
const maxReasons = 10

// Unseal writes o.In to o.Out with every sealed dxpu frame it can open
// with the secrets of o.KeyLog replaced by the plain frame it was sealed
// from (SEALED clear, security header and tag gone, body in clear; IPv4
// and UDP lengths and checksums fixed). Other frames are copied as they
// are. Sealed frames that do not open are left out of the output and
// counted by reason, one stderr line per reason; any makes the error
// apperr.ErrFailed. Bad options and key logs are apperr.ErrUsage; I/O
// errors are plain.
func Unseal(o UnsealOptions, stdout, stderr io.Writer) error {
	return UnsealContext(context.Background(), o, stdout, stderr)
}

// UnsealContext is Unseal, stopping when ctx ends. o.Out is replaced only
// once the whole output is written: on an error or when ctx ends it keeps
// what it had. The traffic in it is as secret as the keys that opened it:
// a new file of mode 0600 (secretfile.Create) takes its place, whatever
// the mode of the file it replaces. o.KeyLog is read through
// secretfile.Open: a regular file of this process's user, mode 0600 or
// 0400, or a usage error naming --key-log, the path and what is wrong.
func UnsealContext(ctx context.Context, o UnsealOptions, stdout, stderr io.Writer) error {
	if o.In == "" || o.Out == "" || o.KeyLog == "" {
		return apperr.Usage(errors.New("unseal: --key-log, IN and OUT are required"))
	}
	if err := notStdout("unseal", "OUT", o.Out); err != nil {
		return err
	}
	if o.UDPPort == 0 {
		return apperr.Usage(errors.New("unseal: --udp-port 0: want the dxpu UDP port"))
	}
	// Either input named as OUT would be lost.
	if err := sameFile("unseal", "OUT", o.Out, "IN", o.In); err != nil {
		return err
	}
	if err := sameFile("unseal", "OUT", o.Out, "--key-log", o.KeyLog); err != nil {
		return err
	}
	// The key log holds traffic secrets: secretfile refuses one others
	// can read (or chose), and a FIFO or directory, at once.
	kf, err := secretfile.Open("--key-log", o.KeyLog)
	if err != nil {
		return apperr.Usage(fmt.Errorf("unseal: %w", err))
	}
	secrets, err := seal.ReadKeyLog(kf)
	kf.Close()
	if err != nil {
		return apperr.Usage(fmt.Errorf("unseal: --key-log %s: %w", o.KeyLog, err))
	}
	r, w, err := openRewrite(o.In, o.Out, o.PcapNG, o.Nanos, true)
	if err != nil {
		return err
	}
	defer r.Close()
	defer w.abort()
	u := &unsealer{o: &o, u: seal.NewUnsealer(secrets), w: w.Writer, reasons: map[string]*reasonCount{}}
	err = u.run(ctx, r)
	if err == nil {
		err = w.commit()
	}
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(UnsealJSON{In: o.In, Out: o.Out, KeyLog: o.KeyLog, Frames: u.read, UnsealedFrames: u.opened,
			HandshakeFrames: u.handshake, CopiedFrames: u.copied, UnopenedFrames: u.failed, Secrets: len(secrets)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s: %s read, %d unsealed (%d handshake), %d copied as they were, %s not opened; %s in %s\n",
			o.Out, count(u.read, "frame"), u.opened, u.handshake, u.copied, count(u.failed, "sealed frame"), count(len(secrets), "secret"), o.KeyLog)
	}
	u.report(stderr)
	if u.failed > 0 {
		return apperr.Failed(fmt.Errorf("%s of %s did not open", count(u.failed, "sealed frame"), o.In))
	}
	return nil
}

// count is n and noun, plural unless n is 1: 1 secret, 2 secrets, 0 frames.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

type reasonCount struct {
	n, first int
}

type unsealer struct {
	o       *UnsealOptions
	u       *seal.Unsealer
	w       *pcapio.Writer
	reasons map[string]*reasonCount

	read, opened, handshake, copied, failed, unparsed int
	out                                               []byte
}

func (u *unsealer) run(ctx context.Context, r *pcapio.Reader) error {
	cfg := &encap.Config{UDPPort: u.o.UDPPort}
	for {
		if err := interrupted(ctx, "unseal", u.o.Out, u.read); err != nil {
			return err
		}
		data, ci, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", u.o.In, err)
		}
		u.read++
		lay, err := u.walk(data, cfg)
		if err != nil {
			u.unparsed++
		}
		sealed := err == nil && (lay.Encap == encap.EncapDxpuEth || lay.Encap == encap.EncapDxpuUDP) &&
			len(data) >= lay.Payload+encap.HeaderLen && encap.Header(data[lay.Payload:]).Flags()&seal.FlagSealed != 0
		if !sealed {
			u.copied++
			if err := u.write(ci, u.rewritePorts(append(u.out[:0], data...), lay)); err != nil {
				return err
			}
			continue
		}
		if ci.CaptureLength < ci.Length {
			u.fail("cut by the capture's snap length (a sealed frame opens only whole)")
			continue
		}
		payload := data[lay.Payload:]
		if lay.Encap == encap.EncapDxpuUDP {
			payload = data[lay.Payload:min(lay.UDPEnd, len(data))]
		}
		out := append(u.out[:0], data[:lay.Payload]...)
		out, opened, err := u.u.Unseal(out, payload)
		u.out = out
		if err != nil {
			u.fail(reasonOf(err, payload))
			continue
		}
		u.opened++
		if opened.Handshake {
			u.handshake++
		}
		if lay.Encap == encap.EncapDxpuUDP {
			fixIPv4UDP(out, lay)
		}
		if err := u.write(ci, u.rewritePorts(out, lay)); err != nil {
			return err
		}
	}
}

// walk finds the dxpu data of a frame (walkDxpu).
func (u *unsealer) walk(data []byte, cfg *encap.Config) (encap.Layers, error) {
	lay, _, err := walkDxpu(data, cfg)
	return lay, err
}

// walkDxpu is encap.Walk, and for a UDP datagram from (rather than to) the
// dxpu port, Walk again with its destination port, so both directions of
// a pair whose bridges use different ports are found. It returns the
// config the frame walked under, for encap.ParseFrame (nil cfg: the
// defaults).
func walkDxpu(data []byte, cfg *encap.Config) (encap.Layers, *encap.Config, error) {
	lay, err := encap.Walk(data, cfg)
	if err != nil || lay.Encap != encap.EncapNone || lay.IPv4 == 0 {
		return lay, cfg, err
	}
	ip := encap.IPv4(data[lay.IPv4:])
	l4 := lay.IPv4 + ip.HeaderLen()
	if ip.Protocol() != encap.IPProtoUDP || l4+encap.UDPHeaderLen > len(data) {
		return lay, cfg, nil
	}
	port := uint16(encap.DefaultUDPPort)
	if cfg != nil && cfg.UDPPort != 0 {
		port = cfg.UDPPort
	}
	udp := encap.UDP(data[l4:])
	if udp.SrcPort() != port || udp.DstPort() == 0 {
		return lay, cfg, nil
	}
	back := &encap.Config{UDPPort: udp.DstPort()}
	lay, err = encap.Walk(data, back)
	return lay, back, err
}

// rewritePorts applies --out-udp-port to a dxpu-udp frame.
func (u *unsealer) rewritePorts(frame []byte, lay encap.Layers) []byte {
	if u.o.OutUDPPort == 0 || lay.Encap != encap.EncapDxpuUDP {
		return frame
	}
	for _, off := range []int{lay.UDP + encap.UDPSrcPortOffset, lay.UDP + encap.UDPDstPortOffset} {
		if binary.BigEndian.Uint16(frame[off:]) == u.o.UDPPort {
			binary.BigEndian.PutUint16(frame[off:], u.o.OutUDPPort)
		}
	}
	binary.BigEndian.PutUint16(frame[lay.UDP+encap.UDPChecksumOffset:], 0) // none, rather than a wrong one
	return frame
}

// fixIPv4UDP sets the IPv4 total length and checksum and the UDP length
// of a frame whose UDP payload now ends at the frame's end; the UDP
// checksum becomes 0 (none), which IPv4 allows.
func fixIPv4UDP(frame []byte, lay encap.Layers) {
	ip := frame[lay.IPv4:]
	binary.BigEndian.PutUint16(ip[encap.IPv4TotalLenOffset:], uint16(len(frame)-lay.IPv4))
	binary.BigEndian.PutUint16(frame[lay.UDP+encap.UDPLengthOffset:], uint16(len(frame)-lay.UDP))
	binary.BigEndian.PutUint16(frame[lay.UDP+encap.UDPChecksumOffset:], 0)
	ihl := encap.IPv4(ip).HeaderLen()
	binary.BigEndian.PutUint16(ip[encap.IPv4ChecksumOffset:], 0)
	var sum uint32
	for i := 0; i+1 < ihl; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[encap.IPv4ChecksumOffset:], ^uint16(sum))
}

func (u *unsealer) write(ci gopacket.CaptureInfo, frame []byte) error {
	return u.w.WritePacket(gopacket.CaptureInfo{Timestamp: ci.Timestamp, CaptureLength: len(frame), Length: len(frame)}, frame)
}

func (u *unsealer) fail(reason string) {
	u.failed++
	rc := u.reasons[reason]
	if rc == nil {
		rc = &reasonCount{first: u.read}
		u.reasons[reason] = rc
	}
	rc.n++
}

// reasonOf names why a frame did not open, coarsely enough that a
// capture gives a few reasons: the kind of failure, the pair and the
// generation.
func reasonOf(err error, payload []byte) string {
	h := encap.Header(payload)
	key := "session"
	if len(payload) > encap.HeaderLen+1 && payload[encap.HeaderLen+1]&0x80 != 0 {
		key = "handshake"
	}
	switch {
	case errors.Is(err, seal.ErrNoSecret), errors.Is(err, seal.ErrNoSecretOpens):
		return fmt.Sprintf("pair %d generation %d (low byte) %s frames: %v", h.PairID(), payload[encap.HeaderLen+3], key,
			errors.Unwrap(err))
	}
	var fe *seal.FrameError
	if errors.As(err, &fe) {
		return fmt.Sprintf("malformed sealed frame: %s: %v", fe.Field, fe.Err)
	}
	return err.Error()
}

// report prints one line per reason, most frequent first, at most
// maxReasons.
func (u *unsealer) report(stderr io.Writer) {
	if u.unparsed > 0 {
		fmt.Fprintf(stderr, "%s: %s did not parse (copied as they were; 'dxpu pcap info' names them)\n", u.o.In, count(u.unparsed, "frame"))
	}
	keys := make([]string, 0, len(u.reasons))
	for k := range u.reasons {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := u.reasons[b].n - u.reasons[a].n; d != 0 {
			return d
		}
		return u.reasons[a].first - u.reasons[b].first
	})
	for i, k := range keys {
		if i == maxReasons {
			fmt.Fprintf(stderr, "%s: ... and %d more reasons\n", u.o.In, len(keys)-maxReasons)
			break
		}
		rc := u.reasons[k]
		fmt.Fprintf(stderr, "%s: %s not opened (first: frame %d): %s\n", u.o.In, count(rc.n, "frame"), rc.first, k)
	}
}
