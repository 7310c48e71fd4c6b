package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DecodeFile reads a trace file, plain JSON or gzip, and names the workload
// after the file.
func DecodeFile(path string) (*Workload, error) {
	// A directory is refused by name, not by a read failing in the middle
	// of the decoder. A pipe is read as a stream (model --trace <(zcat
	// t.json.gz)).
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotAFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var w *Workload
	var magic [len(sqliteMagic)]byte
	if n, _ := f.ReadAt(magic[:], 0); isSQLite(magic[:n]) {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		w, err = DecodeNsys(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		w.Name = TraceName(path)
		return w, nil
	}
	w, err = Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w.Name = TraceName(path)
	return w, nil
}

// TraceName is the base name of a trace file without .gz and .json.
func TraceName(path string) string {
	n := filepath.Base(path)
	n = strings.TrimSuffix(n, ".gz")
	n = strings.TrimSuffix(n, ".json")
	n = strings.TrimSuffix(n, ".sqlite")
	return n
}

// Decode reads a Kineto Chrome trace from r as a stream: gzip is detected by
// its magic bytes (1f 8b), and only the operations the model needs are kept.
// Malformed or truncated input yields a *SyntaxError with the byte offset
// (in the decompressed JSON) where decoding stopped.
func Decode(r io.Reader) (*Workload, error) {
	br := bufio.NewReaderSize(r, bufSize)
	if head, _ := br.Peek(len(sqliteMagic)); isSQLite(head) {
		// An Nsight Systems export: SQLite needs random access.
		all, err := io.ReadAll(br)
		if err != nil {
			return nil, fmt.Errorf("trace: reading SQLite database: %w", err)
		}
		return DecodeNsys(bytes.NewReader(all), int64(len(all)))
	}
	magic, _ := br.Peek(2)
	var src io.Reader = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace: gzip header: %w", err)
		}
		// Decompress on another goroutine so that inflating and scanning
		// overlap on two cores; closing the pipe's read end stops it.
		pr, pw := io.Pipe()
		go func() {
			_, err := io.CopyBuffer(pw, zr, make([]byte, bufSize))
			pw.CloseWithError(err)
		}()
		defer pr.Close()
		src = pr
	}
	d := newDecoder(src)
	err := d.run()
	d.w.Bytes = d.s.offset()
	if err != nil {
		return nil, err
	}
	d.linkFlows()
	return d.w, nil
}

type flow struct {
	id, pid, tid, ts int64
	start            bool
}

type decoder struct {
	s      *scanner
	w      *Workload
	names  map[string]string
	strIDs map[string]int64
	steps  map[int64]int
	flows  []flow

	key                          []byte // the current key: a view into the scanner's buffer or keyBuf
	keyBuf, str, name, cat, sync []byte
	ev                           event
}

// event is the decoder's per-event state; it is reset, never reallocated.
type event struct {
	ph                  byte
	hasTS, hasDur       bool
	ts, dur             int64
	pid, tid            int64
	id                  int64
	hasID               bool
	corr, stream, dev   int64
	bytes               int64
	waitStream, waitCor int64
	syncKind            SyncKind
	tidNum              bool // tid was a number or numeric string
}

func newDecoder(r io.Reader) *decoder {
	return &decoder{
		s:      newScanner(r),
		w:      &Workload{SchemaVersion: -1},
		names:  make(map[string]string),
		strIDs: make(map[string]int64),
		steps:  make(map[int64]int),
		keyBuf: make([]byte, 0, 64),
		str:    make([]byte, 0, 256),
		name:   make([]byte, 0, 256),
		cat:    make([]byte, 0, 32),
		sync:   make([]byte, 0, 32),
	}
}

func (d *decoder) run() error {
	s := d.s
	c, ok := s.skipWS()
	if !ok {
		if s.rerr != nil && !errors.Is(s.rerr, io.EOF) {
			return s.errAt("reading trace")
		}
		return ErrNoEvents
	}
	seen := false
	switch c {
	case '[':
		s.pos++
		if err := d.events(); err != nil {
			return err
		}
		seen = true
	case '{':
		s.pos++
		var err error
		if seen, err = d.topObject(); err != nil {
			return err
		}
	default:
		return &SyntaxError{Offset: s.offset(), Msg: "top-level value is not an object or array", Err: ErrNotTrace}
	}
	if _, ok := s.skipWS(); ok {
		return s.errAt("data after the end of the trace")
	}
	if s.rerr != nil && !errors.Is(s.rerr, io.EOF) {
		return s.errAt("after the end of the trace")
	}
	if !seen {
		return ErrNoEvents
	}
	return nil
}

// topObject reads the members of the top-level object; traceEvents is
// streamed, the rest skipped.
func (d *decoder) topObject() (bool, error) {
	s := d.s
	seen := false
	if c, ok := s.skipWS(); ok && c == '}' {
		s.pos++
		return false, nil
	}
	for {
		if err := d.readKey(); err != nil {
			return seen, err
		}
		switch string(d.key) {
		case "traceEvents":
			c, err := s.next("where the traceEvents array was expected")
			if err != nil {
				return seen, err
			}
			if c != '[' {
				s.pos--
				return seen, s.errAt("traceEvents is not an array")
			}
			if err := d.events(); err != nil {
				return seen, err
			}
			seen = true
		case "schemaVersion":
			v, ok, err := d.readInt()
			if err != nil {
				return seen, err
			}
			if ok {
				d.w.SchemaVersion = v
			}
		default:
			if err := s.skipValue(); err != nil {
				return seen, err
			}
		}
		if end, err := s.endOrComma('}', "after a top-level member", "in the top-level object"); end || err != nil {
			return seen, err
		}
	}
}

// readKey reads `"key":` into d.key.
func (d *decoder) readKey() error {
	s := d.s
	c, err := s.next("where an object key was expected")
	if err != nil {
		return err
	}
	if c != '"' {
		s.pos--
		return s.errAt("object key must be a string")
	}
	if d.key, err = s.readStringRef(d.keyBuf[:0]); err != nil {
		return err
	}
	if s.pos < s.end && s.buf[s.pos] == ':' { // the usual case, no refill
		s.pos++
		return nil
	}
	// Reading on may refill the buffer the key points into: copy it first.
	d.keyBuf = append(d.keyBuf[:0], d.key...)
	d.key = d.keyBuf
	return s.colon()
}

// events streams the elements of the traceEvents array ('[' consumed).
func (d *decoder) events() error {
	s := d.s
	if c, ok := s.skipWS(); ok && c == ']' {
		s.pos++
		return nil
	}
	for {
		c, err := s.next("where a trace event was expected")
		if err != nil {
			return err
		}
		if c == '{' {
			if err := d.event(); err != nil {
				return err
			}
		} else {
			// Not an object: valid JSON perhaps, but no event. Skip it.
			s.pos--
			if err := s.skipValue(); err != nil {
				return err
			}
		}
		d.w.Events++
		if end, err := s.endOrComma(']', "after a trace event", "after a trace event"); end || err != nil {
			return err
		}
	}
}

// event reads one event object ('{' consumed) and keeps it if it matters.
func (d *decoder) event() error {
	s := d.s
	e := &d.ev
	*e = event{pid: NoID, tid: NoID, corr: NoID, stream: NoID, dev: NoID, waitStream: NoID, waitCor: NoID, id: NoID}
	d.name, d.cat, d.sync = d.name[:0], d.cat[:0], d.sync[:0]
	if c, ok := s.skipWS(); ok && c == '}' {
		s.pos++
		return nil
	}
	for {
		if err := d.readKey(); err != nil {
			return err
		}
		var err error
		switch string(d.key) {
		case "ph":
			if err = d.readStr(); err == nil && len(d.str) > 0 {
				e.ph = d.str[0]
			}
		case "cat":
			d.cat, err = d.readStrInto(d.cat[:0])
		case "name":
			d.name, err = d.readStrInto(d.name[:0])
		case "pid":
			e.pid, _, err = d.readID()
		case "tid":
			e.tid, e.tidNum, err = d.readID()
		case "ts":
			e.ts, e.hasTS, err = d.readMicros()
		case "dur":
			e.dur, e.hasDur, err = d.readMicros()
		case "id":
			e.id, e.hasID, err = d.readID()
		case "args":
			err = d.args()
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
		end, err := s.endOrComma('}', "in a trace event", "in a trace event")
		if err != nil {
			return err
		}
		if end {
			break
		}
	}
	d.keep()
	return nil
}

func (d *decoder) args() error {
	s := d.s
	e := &d.ev
	c, err := s.next("where args was expected")
	if err != nil {
		return err
	}
	if c != '{' {
		s.pos--
		return s.skipValue() // args of another shape: nothing we use
	}
	if c, ok := s.skipWS(); ok && c == '}' {
		s.pos++
		return nil
	}
	for {
		if err := d.readKey(); err != nil {
			return err
		}
		var err error
		switch string(d.key) {
		case "correlation":
			e.corr, _, err = d.readIntOr(NoID)
		case "stream":
			e.stream, _, err = d.readIntOr(NoID)
		case "device":
			e.dev, _, err = d.readIntOr(NoID)
		case "bytes":
			e.bytes, _, err = d.readIntOr(0)
		case "wait_on_stream":
			e.waitStream, _, err = d.readIntOr(NoID)
		case "wait_on_cuda_event_record_corr_id":
			e.waitCor, _, err = d.readIntOr(NoID)
		case "cuda_sync_kind":
			if err = d.readStr(); err == nil {
				e.syncKind = parseSyncKind(d.str)
			}
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
		if end, err := s.endOrComma('}', "in event args", "in event args"); end || err != nil {
			return err
		}
	}
}

// category of an event, from its cat field (new and old Kineto spellings).
type category uint8

const (
	catOther category = iota
	catRuntime
	catKernel
	catMemcpy
	catMemset
	catSync
	catFlow
)

func categorize(cat []byte) category {
	switch string(cat) {
	case "cuda_runtime", "cuda_driver", "Runtime", "runtime", "Driver", "driver", "hip_runtime", "cuda_runtime_api":
		return catRuntime
	case "kernel", "Kernel":
		return catKernel
	case "gpu_memcpy", "Memcpy", "memcpy":
		return catMemcpy
	case "gpu_memset", "Memset", "memset":
		return catMemset
	case "cuda_sync":
		return catSync
	case "ac2g", "async_cpu_to_gpu", "async":
		return catFlow
	}
	return catOther
}

var stepPrefix = []byte("ProfilerStep#")

// keep turns the current event into an Op, Step or flow if it is one.
func (d *decoder) keep() {
	e := &d.ev
	cat := categorize(d.cat)
	if cat == catFlow {
		if (e.ph == 's' || e.ph == 'f' || e.ph == 't') && e.hasID && e.hasTS {
			d.flows = append(d.flows, flow{id: e.id, pid: e.pid, tid: e.tid, ts: e.ts, start: e.ph == 's'})
		}
		return
	}
	if e.ph != 'X' || !e.hasTS {
		return
	}
	dur := e.dur
	if !e.hasDur || dur < 0 {
		dur = 0
	}
	if bytes.HasPrefix(d.name, stepPrefix) && string(d.cat) != "gpu_user_annotation" {
		num, err := strconv.ParseInt(string(d.name[len(stepPrefix):]), 10, 64)
		if err != nil {
			num = int64(len(d.w.Steps))
		}
		if _, dup := d.steps[num]; dup {
			return // the first mark of a step wins
		}
		d.steps[num] = len(d.w.Steps)
		d.w.Steps = append(d.w.Steps, Step{Num: num, Name: d.intern(d.name), Start: e.ts, Dur: dur, PID: e.pid, TID: e.tid})
		return
	}
	op := Op{Start: e.ts, Dur: dur, PID: e.pid, TID: e.tid, Device: NoID, Stream: NoID, Corr: e.corr,
		WaitStream: NoID, WaitEventCorr: NoID}
	switch cat {
	case catRuntime:
		op.Kind = Runtime
	case catKernel, catMemcpy, catMemset:
		op.Kind = Kernel
		if cat == catMemcpy {
			op.Kind = Memcpy
		} else if cat == catMemset {
			op.Kind = Memset
		}
		op.Device = e.dev
		if op.Device == NoID {
			op.Device = e.pid
		}
		op.Stream = normStream(e.stream)
		if op.Stream == NoID && e.tidNum {
			op.Stream = e.tid
		}
		op.Bytes = e.bytes
	case catSync:
		op.Kind = Sync
		op.Device = e.dev
		op.Stream = normStream(e.stream)
		op.SyncKind = e.syncKind
		op.WaitStream = normStream(e.waitStream)
		op.WaitEventCorr = e.waitCor
		if op.WaitEventCorr < 0 {
			op.WaitEventCorr = NoID
		}
	default:
		return
	}
	op.Name = d.intern(d.name)
	if op.Kind == Memcpy {
		op.Copy, op.Pageable = ParseCopy(op.Name)
	}
	if len(d.w.Ops) == cap(d.w.Ops) {
		// Double: append's gentler growth for large slices would copy
		// (and allocate) five times the final size in all.
		grown := make([]Op, len(d.w.Ops), max(1024, 2*cap(d.w.Ops)))
		copy(grown, d.w.Ops)
		d.w.Ops = grown
	}
	d.w.Ops = append(d.w.Ops, op)
}

// normStream maps the "no stream" markers (-1, 2^32-1) to NoID.
func normStream(v int64) int64 {
	if v < 0 || v == math.MaxUint32 {
		return NoID
	}
	return v
}

func (d *decoder) intern(b []byte) string {
	if v, ok := d.names[string(b)]; ok {
		return v
	}
	v := string(b)
	d.names[v] = v
	return v
}

func (d *decoder) readStr() error {
	var err error
	d.str, err = d.readStrInto(d.str[:0])
	return err
}

// readStrInto reads a string value; a value of another type is skipped and
// reads as empty.
func (d *decoder) readStrInto(dst []byte) ([]byte, error) {
	s := d.s
	c, err := s.next("where a value was expected")
	if err != nil {
		return dst, err
	}
	if c == '"' {
		return s.readString(dst)
	}
	s.pos--
	return dst, s.skipValue()
}

// readID reads a pid, tid or id: a number, or a string that is a number
// (decimal, 0x hex, or "stream 7"-like with a trailing number), or any other
// string, which gets a stable negative identifier of its own.
func (d *decoder) readID() (int64, bool, error) {
	s := d.s
	c, ok := s.skipWS()
	if !ok {
		return NoID, false, s.errAt("where a value was expected")
	}
	if c != '"' {
		v, ok, err := d.readIntOr(NoID)
		return v, ok, err
	}
	s.pos++
	var err error
	if d.str, err = s.readString(d.str[:0]); err != nil {
		return NoID, false, err
	}
	if v, ok := parseIDString(d.str); ok {
		return v, true, nil
	}
	if v, ok := d.strIDs[string(d.str)]; ok {
		return v, false, nil
	}
	v := -1000 - int64(len(d.strIDs))
	d.strIDs[string(d.str)] = v
	return v, false, nil
}

func parseIDString(b []byte) (int64, bool) {
	b = bytes.TrimSpace(b)
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		v, err := strconv.ParseInt(string(b[2:]), 16, 64)
		return v, err == nil
	}
	// Trailing decimal number, as in "7" or "stream 7".
	i := len(b)
	for i > 0 && b[i-1] >= '0' && b[i-1] <= '9' {
		i--
	}
	if i == len(b) || len(b)-i > 18 {
		return 0, false
	}
	if i > 0 && !bytes.HasPrefix(b, []byte("stream ")) {
		return 0, false
	}
	var v int64
	for _, c := range b[i:] {
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// readInt reads a number as an integer; ok is false (and the value
// skipped) when it is not a number.
func (d *decoder) readInt() (int64, bool, error) { return d.readIntOr(NoID) }

func (d *decoder) readIntOr(def int64) (int64, bool, error) {
	s := d.s
	c, ok := s.skipWS()
	if !ok {
		return def, false, s.errAt("where a value was expected")
	}
	if c != '-' && (c < '0' || c > '9') {
		if c == '"' { // numeric strings appear in some exporters
			s.pos++
			var err error
			if d.str, err = s.readString(d.str[:0]); err != nil {
				return def, false, err
			}
			if v, err := strconv.ParseInt(string(bytes.TrimSpace(d.str)), 10, 64); err == nil {
				return v, true, nil
			}
			return def, false, nil
		}
		return def, false, s.skipValue()
	}
	if err := s.readNumber(); err != nil {
		return def, false, err
	}
	v, ok := parseInt(s.num)
	if !ok {
		return def, false, nil
	}
	return v, true, nil
}

// parseInt converts a validated JSON number literal, truncating fractions.
func parseInt(b []byte) (int64, bool) {
	neg := false
	i := 0
	if len(b) > 0 && b[0] == '-' {
		neg, i = true, 1
	}
	var v int64
	j := i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		if j-i >= 18 {
			return floatInt(b)
		}
		v = v*10 + int64(b[j]-'0')
	}
	if j < len(b) {
		return floatInt(b)
	}
	if neg {
		v = -v
	}
	return v, true
}

func floatInt(b []byte) (int64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f > math.MaxInt64/2 || f < math.MinInt64/2 {
		return 0, false
	}
	return int64(f), true
}

// readMicros reads a microsecond number (integer or decimal) as integer
// nanoseconds, exactly for up to 16 integer digits and rounding beyond
// three decimals.
func (d *decoder) readMicros() (int64, bool, error) {
	s := d.s
	c, ok := s.skipWS()
	if !ok {
		return 0, false, s.errAt("where a time was expected")
	}
	if c != '-' && (c < '0' || c > '9') {
		if c == '"' {
			s.pos++
			var err error
			if d.str, err = s.readString(d.str[:0]); err != nil {
				return 0, false, err
			}
			f, err := strconv.ParseFloat(string(bytes.TrimSpace(d.str)), 64)
			if err != nil || math.IsNaN(f) || math.Abs(f) > 9e15 {
				return 0, false, nil
			}
			return int64(math.Round(f * 1000)), true, nil
		}
		return 0, false, s.skipValue()
	}
	if err := s.readNumber(); err != nil {
		return 0, false, err
	}
	v, ok := microsToNanos(s.num)
	return v, ok, nil
}

func microsToNanos(b []byte) (int64, bool) {
	neg := false
	i := 0
	if len(b) > 0 && b[0] == '-' {
		neg, i = true, 1
	}
	var v int64
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
		digits++
		if digits > 16 {
			return floatMicros(b)
		}
	}
	if v > math.MaxInt64/1000-1000 {
		return floatMicros(b)
	}
	v *= 1000
	if i < len(b) && b[i] == '.' {
		i++
		scale := int64(100)
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if scale >= 1 {
				v += int64(b[i]-'0') * scale
				scale /= 10
			} else if scale == 0 {
				if b[i] >= '5' {
					v++
				}
				scale = -1
			}
		}
	}
	if i < len(b) { // exponent
		return floatMicros(b)
	}
	if neg {
		v = -v
	}
	return v, true
}

func floatMicros(b []byte) (int64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 9e15 {
		return 0, false
	}
	return int64(math.Round(f * 1000)), true
}

// linkFlows recovers missing correlation IDs from flow events: a flow start
// ('s') sits on the runtime call, its finish ('f') on the GPU operation, at
// the same pid, tid and timestamp.
func (d *decoder) linkFlows() {
	type key struct{ pid, tid, ts int64 }
	missing := false
	for i := range d.w.Ops {
		if d.w.Ops[i].Corr == NoID && d.w.Ops[i].Kind != Sync {
			missing = true
			break
		}
	}
	if !missing || len(d.flows) == 0 {
		d.flows = nil
		return
	}
	starts := make(map[key]int64)
	finishes := make(map[key]int64)
	for _, f := range d.flows {
		k := key{f.pid, f.tid, f.ts}
		if f.start {
			starts[k] = f.id
		} else {
			finishes[k] = f.id
		}
	}
	for i := range d.w.Ops {
		o := &d.w.Ops[i]
		if o.Corr != NoID {
			continue
		}
		k := key{o.PID, o.TID, o.Start}
		var id int64
		var ok bool
		if o.Kind == Runtime {
			id, ok = starts[k]
		} else if o.Kind.IsGPU() {
			id, ok = finishes[k]
		}
		if ok {
			o.Corr = id
			d.w.FlowsLinked++
		}
	}
	d.flows = nil
}
