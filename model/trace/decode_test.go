package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// newSchema is a small trace in the current Kineto schema: a step, a
// launch and its kernel, a pageable copy with its stream sync, an event
// record and a cross-stream wait, with ac2g flows.
const newSchema = `{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "A100"}],
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 10, "ts": 100, "dur": 500, "args": {"External id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 101, "dur": 20, "args": {"Input Dims": [[2, 3], [3, 4]], "Call stack": "a\nb\"c\u00e9"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 102.25, "dur": 5.5, "args": {"cbid": 211, "correlation": 40}},
  {"ph": "s", "id": 40, "pid": 10, "tid": 10, "ts": 102.25, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 110, "dur": 50, "args": {"queued": 0, "device": 0, "stream": 7, "correlation": 40, "grid": [1, 2, 3]}},
  {"ph": "f", "id": 40, "pid": 0, "tid": 7, "ts": 110, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, "tid": 10, "ts": 120, "dur": 8, "args": {"correlation": 41}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 160, "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 41, "bytes": 4096}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": 10, "ts": 130, "dur": 35, "args": {"correlation": 42}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 131, "dur": 34, "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": 42, "device": 0}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20, "ts": 170, "dur": 1, "args": {"cuda_sync_kind": "Stream Wait Event", "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 43, "stream": 20, "correlation": 44, "device": 0}},
  {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": -1, "ts": 180, "dur": 1, "args": {"cuda_sync_kind": "Context Sync", "stream": 4294967295, "correlation": 45, "device": 0}},
  {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 20, "ts": 190, "dur": 1, "args": {"device": 0, "stream": 20, "correlation": 46, "bytes": 512}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#7", "pid": 0, "tid": 7, "ts": 110, "dur": 900},
  {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
  {"ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1}
  ],
  "traceName": "x.json"
}`

func decodeString(t *testing.T, s string) *Workload {
	t.Helper()
	w, err := Decode(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return w
}

func TestDecodeNewSchema(t *testing.T) {
	t.Parallel()
	w := decodeString(t, newSchema)
	if w.SchemaVersion != 1 || w.Events != 16 {
		t.Fatalf("schema %d events %d, want 1 and 16", w.SchemaVersion, w.Events)
	}
	if len(w.Steps) != 1 || w.Steps[0].Num != 7 || w.Steps[0].Start != 100000 || w.Steps[0].Dur != 500000 {
		t.Fatalf("steps = %+v", w.Steps)
	}
	if got := [5]int{w.Count(Runtime), w.Count(Kernel), w.Count(Memcpy), w.Count(Memset), w.Count(Sync)}; got != [5]int{3, 1, 1, 1, 3} {
		t.Fatalf("counts runtime/kernel/memcpy/memset/sync = %v", got)
	}
	launch := w.Ops[0]
	if launch.Kind != Runtime || launch.Name != "cudaLaunchKernel" || launch.Start != 102250 || launch.Dur != 5500 ||
		launch.PID != 10 || launch.TID != 10 || launch.Corr != 40 {
		t.Errorf("launch = %+v", launch)
	}
	k := w.Ops[1]
	if k.Kind != Kernel || k.Device != 0 || k.Stream != 7 || k.Corr != 40 || k.Start != 110000 || k.Dur != 50000 {
		t.Errorf("kernel = %+v", k)
	}
	cp := w.Ops[3]
	if cp.Kind != Memcpy || cp.Copy != DtoH || !cp.Pageable || cp.Bytes != 4096 {
		t.Errorf("memcpy = %+v", cp)
	}
	var kinds []SyncKind
	for _, o := range w.Ops {
		if o.Kind == Sync {
			kinds = append(kinds, o.SyncKind)
			switch o.SyncKind {
			case SyncStream:
				if o.Stream != 7 || o.Corr != 42 {
					t.Errorf("stream sync = %+v", o)
				}
			case SyncStreamWaitEvent:
				if o.Stream != 20 || o.WaitStream != 7 || o.WaitEventCorr != 43 {
					t.Errorf("stream wait event = %+v", o)
				}
			case SyncContext:
				if o.Stream != NoID {
					t.Errorf("context sync stream %d, want none", o.Stream)
				}
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("sync kinds %v", kinds)
	}
	first, last, _ := w.Span()
	if first != 102250 || last != 191000 {
		t.Errorf("span %d..%d, want 102250..191000", first, last)
	}
}

// oldSchema is in the style of PyTorch 1.8-1.10 traces: capitalized
// categories, string tids, "async" flows, and no correlation in the args of
// the kernel, which the flow must supply.
const oldSchema = `[
{"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 5, "tid": "5", "ts": 1000, "dur": 90},
{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": "5", "ts": 1001, "dur": 4, "args": {"correlation": 9, "external id": 2}},
{"ph": "s", "id": 9, "pid": 5, "tid": "5", "ts": 1001, "cat": "async", "name": "launch"},
{"ph": "X", "cat": "Kernel", "name": "k1", "pid": 0, "tid": "stream 7", "ts": 1010, "dur": 20, "args": {"device": 0}},
{"ph": "f", "id": 9, "pid": 0, "tid": "stream 7", "ts": 1010, "cat": "async", "name": "launch", "bp": "e"},
{"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": "stream 7", "ts": 1040, "dur": 2, "args": {"correlation": 10, "bytes": 65536}},
{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 5, "tid": "worker", "ts": 1050, "dur": 3, "args": {"correlation": 11}},
{"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 5, "tid": "5", "ts": 1035.5, "dur": 3, "args": {"correlation": 10}}
]`

func TestDecodeOldSchema(t *testing.T) {
	t.Parallel()
	w := decodeString(t, oldSchema)
	if len(w.Steps) != 1 || w.Steps[0].Num != 3 {
		t.Fatalf("steps = %+v", w.Steps)
	}
	if w.FlowsLinked != 1 {
		t.Errorf("FlowsLinked = %d, want 1", w.FlowsLinked)
	}
	var k, cp, drv *Op
	for i := range w.Ops {
		switch w.Ops[i].Name {
		case "k1":
			k = &w.Ops[i]
		case "Memcpy HtoD (Pinned -> Device)":
			cp = &w.Ops[i]
		case "cuLaunchKernel":
			drv = &w.Ops[i]
		}
	}
	if k == nil || k.Corr != 9 || k.Stream != 7 || k.Device != 0 {
		t.Errorf("kernel = %+v, want corr 9 (from the flow) on stream 7", k)
	}
	if cp == nil || cp.Copy != HtoD || cp.Pageable || cp.Stream != 7 || cp.Device != 0 {
		t.Errorf("memcpy = %+v", cp)
	}
	if drv == nil || drv.Kind != Runtime || drv.TID >= 0 {
		t.Errorf("driver call = %+v, want a runtime op on a named (negative id) thread", drv)
	}
	if w.Ops[0].TID != 5 {
		t.Errorf("numeric string tid read as %d", w.Ops[0].TID)
	}
}

func TestDecodeGzipAndChunkedReads(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, newSchema)
	zw.Close()
	want := decodeString(t, newSchema)
	for name, r := range map[string]io.Reader{
		"gzip":          bytes.NewReader(buf.Bytes()),
		"one byte":      iotest.OneByteReader(strings.NewReader(newSchema)),
		"half":          iotest.HalfReader(strings.NewReader(newSchema)),
		"gzip one byte": iotest.OneByteReader(bytes.NewReader(buf.Bytes())),
	} {
		w, err := Decode(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(w.Ops) != len(want.Ops) || w.Events != want.Events || w.Bytes != int64(len(newSchema)) {
			t.Fatalf("%s: %d ops %d events %d bytes, want %d, %d, %d", name, len(w.Ops), w.Events, w.Bytes, len(want.Ops), want.Events, len(newSchema))
		}
		for i := range w.Ops {
			if w.Ops[i] != want.Ops[i] {
				t.Fatalf("%s: op %d = %+v, want %+v", name, i, w.Ops[i], want.Ops[i])
			}
		}
	}
}

func TestDecodeTruncatedAtEveryByte(t *testing.T) {
	t.Parallel()
	for n := 0; n < len(newSchema); n++ {
		prefix := newSchema[:n]
		_, err := Decode(strings.NewReader(prefix))
		if err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", n)
		}
		if strings.TrimSpace(prefix) == "" {
			if !errors.Is(err, ErrNoEvents) {
				t.Fatalf("empty prefix: %v, want ErrNoEvents", err)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("prefix of %d bytes: %v, want a truncation SyntaxError", n, err)
		}
		if se.Offset != int64(n) {
			t.Fatalf("prefix of %d bytes: offset %d, want %d", n, se.Offset, n)
		}
	}
}

func TestDecodeTruncatedGzip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, newSchema)
	zw.Close()
	_, err := Decode(bytes.NewReader(buf.Bytes()[:buf.Len()/2]))
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("half a gzip stream: %v, want a truncation SyntaxError", err)
	}
	if se.Offset <= 0 || se.Offset >= int64(len(newSchema)) {
		t.Errorf("offset %d outside the decompressed text", se.Offset)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		offset int64
		msg    string
	}{
		{`{"traceEvents":[{"ph":"X",}]}`, 26, "object key must be a string"},
		{`{"traceEvents":[{"ph" "X"}]}`, 22, "expected ':'"},
		{`{"traceEvents":[{"ts":1.}]}`, 24, "malformed number"},
		{`{"traceEvents":[{"ts":01}]}`, 23, "expected ','"},
		{`{"traceEvents":[{"name":"a` + "\x01" + `"}]}`, 26, "control character"},
		{`{"traceEvents":[{"name":"\q"}]}`, 26, "invalid escape"},
		{`{"traceEvents":[{"args":{"x":[1,2}}]}`, 33, "expected ',' or end of container"},
		{`{"traceEvents":[{}] x`, 20, "expected ',' or '}' in the top-level object"},
		{`[{}] x`, 5, "data after the end"},
		{`{"traceEvents":{}}`, 15, "traceEvents is not an array"},
		{`{"traceEvents":[{"args":tru}]}`, 27, "invalid literal"},
		{`{"traceEvents":[{}]}}`, 20, "data after the end"},
	}
	for _, c := range cases {
		_, err := Decode(strings.NewReader(c.in))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a SyntaxError", c.in, err)
			continue
		}
		if se.Offset != c.offset || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%s: %v (offset %d), want offset %d and %q", c.in, err, se.Offset, c.offset, c.msg)
		}
		if !strings.Contains(err.Error(), "byte ") {
			t.Errorf("%s: message %q does not name the byte", c.in, err)
		}
	}
	if _, err := Decode(strings.NewReader(`42`)); !errors.Is(err, ErrNotTrace) {
		t.Errorf("a number: %v, want ErrNotTrace", err)
	}
	if _, err := Decode(strings.NewReader(`{"schemaVersion": 1}`)); !errors.Is(err, ErrNoEvents) {
		t.Errorf("no traceEvents: %v, want ErrNoEvents", err)
	}
	if _, err := Decode(iotest.ErrReader(errors.New("disk on fire"))); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("read error: %v, want it passed on", err)
	}
}

func TestDecodeLenientValues(t *testing.T) {
	t.Parallel()
	// Wrong types for members the decoder reads are not syntax errors.
	w := decodeString(t, `{"traceEvents":[
	 {"ph":"X","cat":"kernel","name":"a","pid":{"x":1},"tid":[7],"ts":"5","dur":null,"args":{"stream":"7","correlation":true}},
	 {"ph":"X","cat":"kernel","name":"no ts","pid":0,"tid":7,"dur":1},
	 {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":1e3,"dur":-4,"args":{"stream":7,"correlation":1.5e1}},
	 3, "x", null
	]}`)
	if len(w.Ops) != 2 || w.Events != 6 {
		t.Fatalf("%d ops of %d events, want 2 of 6", len(w.Ops), w.Events)
	}
	a, b := w.Ops[0], w.Ops[1]
	if a.Start != 5000 || a.Dur != 0 || a.Stream != 7 || a.Corr != NoID {
		t.Errorf("a = %+v", a)
	}
	if b.Start != 1000000 || b.Dur != 0 || b.Corr != 15 {
		t.Errorf("b = %+v", b)
	}
}

func TestMicrosToNanos(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "1": 1000, "10.5": 10500, "1712195495519695.8": 1712195495519695800,
		"2.0005": 2001, "2.0004": 2000, "-3.25": -3250, "1.5e3": 1500000, "0.001": 1,
		"123456789012345": 123456789012345000,
	} {
		got, ok := microsToNanos([]byte(in))
		if !ok || got != want {
			t.Errorf("microsToNanos(%s) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestParseCopy(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]struct {
		dir      CopyKind
		pageable bool
	}{
		"Memcpy HtoD (Pageable -> Device)": {HtoD, true},
		"Memcpy DtoH (Device -> Pinned)":   {DtoH, false},
		"Memcpy DtoD (Device -> Device)":   {DtoD, false},
		"Memcpy PtoP (Device -> Device)":   {PtoP, false},
		"Memcpy":                           {CopyUnknown, false},
	} {
		dir, pg := ParseCopy(name)
		if dir != want.dir || pg != want.pageable {
			t.Errorf("ParseCopy(%q) = %v, %v; want %v, %v", name, dir, pg, want.dir, want.pageable)
		}
	}
}

// TestKeyAcrossRefill puts a key's closing quote at the very end of the
// scanner's buffer, with spaces before the colon, so that reading on
// refills the buffer the key was read from.
func TestKeyAcrossRefill(t *testing.T) {
	t.Parallel()
	head := `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"pid":0,"args":{"stream":7,"correlation":5}, "pad":"`
	keyAt := bufSize - len(`,"tid"`)
	pad := strings.Repeat("x", keyAt-len(head)-1)
	doc := head + pad + `","tid"` + strings.Repeat(" ", 100) + `:3},{"pad":"` + strings.Repeat("y", bufSize) + `"}]}`
	if i := strings.Index(doc, `"tid"`); i+len(`"tid"`) != bufSize {
		t.Fatalf("key ends at %d, want %d", i+len(`"tid"`), bufSize)
	}
	w := decodeString(t, doc)
	if len(w.Ops) != 1 || w.Ops[0].TID != 3 || w.Events != 2 {
		t.Fatalf("ops %+v, want one kernel with tid 3", w.Ops)
	}
}
