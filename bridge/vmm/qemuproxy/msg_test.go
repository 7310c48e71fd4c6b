package qemuproxy

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docHex returns the hex bytes of the doc block that starts with first.
func docHex(t *testing.T, first string) []byte {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	in := false
	hexRun := regexp.MustCompile(`^//\t((?:[0-9a-f]{2}\s+)+)`)
	for _, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, first) {
			in = true
		}
		if !in {
			continue
		}
		m := hexRun.FindStringSubmatch(line + " ")
		if m == nil {
			if len(out) > 0 {
				break
			}
			continue
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(m[1]), ""))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func TestDocExample(t *testing.T) {
	t.Parallel()
	read := Msg{Cmd: BarRead, Bar: BarAccess{Addr: 0xfc000000, Size: 4, Memory: true}}
	if got, want := AppendMsg(nil, read), docHex(t, "05 00 00 00"); !bytes.Equal(got, want) {
		t.Errorf("BAR_READ\n got %x\nwant %x", got, want)
	}
	if got, want := AppendRet(nil, 0x180000a1), docHex(t, "01 00 00 00"); !bytes.Equal(got, want) {
		t.Errorf("RET\n got %x\nwant %x", got, want)
	}
	cmd, n, err := ParseHeader(AppendMsg(nil, read))
	if err != nil || cmd != BarRead || n != 24 {
		t.Fatalf("ParseHeader: %v %d %v", cmd, n, err)
	}
	m, err := ParsePayload(cmd, AppendMsg(nil, read)[HeaderLen:], 0)
	if err != nil || m.Bar != read.Bar {
		t.Fatalf("ParsePayload: %+v %v", m, err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    Msg
		nfds int
	}{
		{Msg{Cmd: CfgRead, Cfg: CfgAccess{Addr: 0x10, Len: 4}}, 0},
		{Msg{Cmd: CfgWrite, Cfg: CfgAccess{Addr: 0x04, Val: 0x6, Len: 2}}, 0},
		{Msg{Cmd: CfgRead, Cfg: CfgAccess{Addr: 0xfff, Len: 1}}, 0},
		{Msg{Cmd: BarWrite, Bar: BarAccess{Addr: 0xfc000100, Val: 0xdeadbeefcafe, Size: 8, Memory: true}}, 0},
		{Msg{Cmd: BarRead, Bar: BarAccess{Addr: 0xc000, Size: 1}}, 0},
		{Msg{Cmd: SyncSysmem, Regions: []Region{{GPA: 0, Size: 0xa0000}, {GPA: 0x100000, Size: 0x7ff00000, Offset: 0x100000}}}, 2},
		{Msg{Cmd: SetIRQFD}, 2},
		{Msg{Cmd: DeviceReset}, 0},
		{Msg{Cmd: Ret, Value: 1<<64 - 1}, 0},
	} {
		b := AppendMsg(nil, tc.m)
		cmd, n, err := ParseHeader(b)
		if err != nil || cmd != tc.m.Cmd || n != len(b)-HeaderLen {
			t.Errorf("%v: header %v %d %v", tc.m.Cmd, cmd, n, err)
			continue
		}
		got, err := ParsePayload(cmd, b[HeaderLen:], tc.nfds)
		if err != nil {
			t.Errorf("%v: %v", tc.m.Cmd, err)
			continue
		}
		if got.Cfg != tc.m.Cfg || got.Bar != tc.m.Bar || got.Value != tc.m.Value || len(got.Regions) != len(tc.m.Regions) {
			t.Errorf("%v: got %+v, want %+v", tc.m.Cmd, got, tc.m)
		}
		for i := range got.Regions {
			if got.Regions[i] != tc.m.Regions[i] {
				t.Errorf("region %d: %+v, want %+v", i, got.Regions[i], tc.m.Regions[i])
			}
		}
	}
}

// TestMalformed: every bad field is refused with the sentinel and the
// field's name and offset.
func TestMalformed(t *testing.T) {
	t.Parallel()
	hdr := func(cmd int32, size uint64) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(cmd))
		b = binary.LittleEndian.AppendUint32(b, 0)
		return binary.LittleEndian.AppendUint64(b, size)
	}
	for _, tc := range []struct {
		name  string
		hdr   []byte
		field string
		err   error
	}{
		{"unknown command", hdr(8, 0), "cmd", ErrCommand},
		{"negative command", hdr(-1, 0), "cmd", ErrCommand},
		{"huge size", hdr(int32(BarRead), 1<<40), "size", ErrSize},
		{"cfg size 16", hdr(int32(CfgRead), 16), "size", ErrSize},
		{"reset with payload", hdr(int32(DeviceReset), 8), "size", ErrSize},
		{"short header", hdr(0, 0)[:10], "header", ErrSize},
	} {
		_, _, err := ParseHeader(tc.hdr)
		var me *MsgError
		if !errors.Is(err, tc.err) || !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.err, tc.field)
		}
	}
	sysmem := func(regions ...Region) []byte {
		return AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: regions})[HeaderLen:]
	}
	for _, tc := range []struct {
		name  string
		cmd   Cmd
		p     []byte
		nfds  int
		field string
		err   error
	}{
		{"cfg len 3", CfgRead, AppendMsg(nil, Msg{Cmd: CfgRead, Cfg: CfgAccess{Len: 3}})[HeaderLen:], 0, "len", ErrField},
		{"cfg past 4 KiB", CfgRead, AppendMsg(nil, Msg{Cmd: CfgRead, Cfg: CfgAccess{Addr: 4094, Len: 4}})[HeaderLen:], 0, "addr", ErrField},
		{"cfg unaligned", CfgWrite, AppendMsg(nil, Msg{Cmd: CfgWrite, Cfg: CfgAccess{Addr: 2, Len: 4}})[HeaderLen:], 0, "addr", ErrField},
		{"bar size 3", BarRead, AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Size: 3}})[HeaderLen:], 0, "size", ErrField},
		{"bar wraps", BarRead, AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Addr: 1<<64 - 2, Size: 4}})[HeaderLen:], 0, "addr", ErrField},
		{"bar with fd", BarRead, AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Size: 4}})[HeaderLen:], 1, "fds", ErrFDs},
		{"irqfd with one fd", SetIRQFD, nil, 1, "fds", ErrFDs},
		{"sysmem without fds", SyncSysmem, sysmem(Region{Size: 4096}), 0, "fds", ErrFDs},
		{"sysmem empty region", SyncSysmem, sysmem(Region{Size: 4096}, Region{GPA: 8192}), 2, "sizes[1]", ErrField},
		{"sysmem overlap", SyncSysmem, sysmem(Region{Size: 8192}, Region{GPA: 4096, Size: 4096}), 2, "gpas[1] overlaps gpas[0]", ErrField},
		{"sysmem wraps", SyncSysmem, sysmem(Region{GPA: 1<<64 - 4096, Size: 8192}), 1, "sizes[0]", ErrField},
		{"sysmem negative offset", SyncSysmem, sysmem(Region{Size: 4096, Offset: -1}), 1, "offsets[0]", ErrField},
		{"short payload", CfgRead, make([]byte, 4), 0, "size", ErrSize},
	} {
		_, err := ParsePayload(tc.cmd, tc.p, tc.nfds)
		var me *MsgError
		if !errors.Is(err, tc.err) || !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.err, tc.field)
		}
	}
}

// FuzzParse: any bytes decode to a message or an error, never a panic, and
// a message that decodes encodes back to the same bytes (padding aside).
func FuzzParse(f *testing.F) {
	f.Add(AppendMsg(nil, Msg{Cmd: BarRead, Bar: BarAccess{Addr: 0xfc000000, Size: 4, Memory: true}}), 0)
	f.Add(AppendMsg(nil, Msg{Cmd: CfgWrite, Cfg: CfgAccess{Addr: 4, Val: 6, Len: 2}}), 0)
	f.Add(AppendMsg(nil, Msg{Cmd: SyncSysmem, Regions: []Region{{Size: 1 << 28}}}), 1)
	f.Add(AppendMsg(nil, Msg{Cmd: SetIRQFD}), 2)
	f.Fuzz(func(t *testing.T, b []byte, nfds int) {
		cmd, n, err := ParseHeader(b)
		if err != nil || len(b) < HeaderLen+n {
			return
		}
		m, err := ParsePayload(cmd, b[HeaderLen:HeaderLen+n], nfds)
		if err != nil {
			return
		}
		again := AppendMsg(nil, m)
		if len(again) != HeaderLen+n {
			t.Fatalf("re-encoded %d bytes, want %d", len(again), HeaderLen+n)
		}
		m2, err := ParsePayload(cmd, again[HeaderLen:], nfds)
		if err != nil || m2.Cfg != m.Cfg || m2.Bar != m.Bar || m2.Value != m.Value || len(m2.Regions) != len(m.Regions) {
			t.Fatalf("round trip: %+v -> %+v (%v)", m, m2, err)
		}
	})
}
