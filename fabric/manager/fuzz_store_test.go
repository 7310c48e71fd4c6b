package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// storeRecords returns every record a manager leaves in its store after a
// registration of a box and a host with agents, an RTT, an allocation of
// two GPUs (keyed pairs) and a link-down report: one record of each kind
// the manager reads back when it takes the lead.
func storeRecords(tb testing.TB) []store.KV {
	tb.Helper()
	st := store.NewMemory()
	m, err := manager.New(manager.Config{Store: st, GPUBridge: fakeagent.New("gpu"), HostBridge: fakeagent.New("host"),
		Switch: fakeagent.New("switch"), Token: token, Logger: quiet(), ReconcileInterval: -1, DegradedAfter: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer func() { srv.Close(); m.Close() }()
	ctx := context.Background()
	c := ctlclient.New(srv.URL, token)
	box := testBox(0, 2)
	box.AgentURL = "https://10.1.0.1:7701"
	_, boxCred, err := c.RegisterBoxAgent(ctx, box)
	if err != nil {
		tb.Fatal(err)
	}
	h := testHost(0)
	h.AgentURL = "https://10.2.0.1:7701"
	if _, _, err := c.RegisterHostAgent(ctx, h); err != nil {
		tb.Fatal(err)
	}
	if err := c.SetRTT(ctx, pool.RTT{Host: "host0", Box: "box0", RTT: pool.Duration(2 * time.Microsecond)}); err != nil {
		tb.Fatal(err)
	}
	a, err := c.Allocate(ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil {
		tb.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/link-down", srv.URL, a.GPUs[0].Pair), strings.NewReader(`{"reason":"peer silent"}`))
	req.Header.Set("Authorization", "Bearer "+boxCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("link-down report: %d", resp.StatusCode)
	}
	kvs, err := st.List(ctx, "")
	if err != nil {
		tb.Fatal(err)
	}
	return kvs
}

// extraKeys are keys of every prefix the manager loads that no seeded
// record holds: a fuzzed value there is one more record, not a changed one.
var extraKeys = []string{"box/zz", "host/zz", "rtt/zz/zz", "alloc/zz", "cred/box/zz", "cred/host/host0x", "cred/other",
	"linkdown/zz/1", "linkdown/zz", "keygen/1", "keygen/99", "keygen/x"}

// FuzzStoreLoad starts a manager on a store whose records are those a
// manager wrote, with one value replaced by the fuzzer's bytes (or one
// record more). A bad record is skipped, never a failed start, a panic or
// an inconsistent pool: the manager starts, its pool passes its invariants,
// every read of the API answers without a 5xx, an allocation is refused or
// granted with the error envelope, and the pool is consistent after.
func FuzzStoreLoad(f *testing.F) {
	kvs := storeRecords(f)
	for i, kv := range kvs {
		f.Add(uint8(i), kv.Value)
		if len(kv.Value) > 2 {
			f.Add(uint8(i), kv.Value[:len(kv.Value)/2])
		}
	}
	for i := range extraKeys {
		f.Add(uint8(len(kvs)+i), []byte(`{"generation":4294967295}`))
	}
	f.Add(uint8(0), []byte(`null`))
	f.Add(uint8(1), []byte(`[]`))
	f.Add(uint8(2), []byte(`{"id":""}`))
	f.Fuzz(func(t *testing.T, which uint8, value []byte) {
		st := store.NewMemory()
		ops := make([]store.Op, 0, len(kvs)+1)
		i := int(which) % (len(kvs) + len(extraKeys))
		for j, kv := range kvs {
			v := kv.Value
			if j == i {
				v = value
			}
			ops = append(ops, store.Put(kv.Key, v))
		}
		if i >= len(kvs) {
			ops = append(ops, store.Put(extraKeys[i-len(kvs)], value))
		}
		if err := st.Apply(context.Background(), ops...); err != nil {
			t.Fatal(err)
		}
		m, err := manager.New(manager.Config{Store: st, GPUBridge: fakeagent.New("gpu"), HostBridge: fakeagent.New("host"),
			Switch: fakeagent.New("switch"), Token: token, Logger: quiet(), ReconcileInterval: -1, DegradedAfter: time.Hour})
		if err != nil {
			t.Fatalf("one bad record (key %d) kept the manager down: %v", i, err)
		}
		defer m.Close()
		if err := m.Pool().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		h := m.Handler()
		do := func(method, path, body string) (int, []byte) {
			req := httptest.NewRequest(method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			b, _ := io.ReadAll(rec.Result().Body)
			return rec.Code, b
		}
		for _, p := range []string{"/healthz", "/v1/stats", "/v1/boxes", "/v1/hosts", "/v1/gpus", "/v1/rtt", "/v1/allocations", "/v1/table", "/v1/events"} {
			if code, b := do(http.MethodGet, p, ""); code >= 500 {
				t.Fatalf("GET %s after loading: %d %s", p, code, b)
			}
		}
		code, b := do(http.MethodPost, "/v1/allocations", `{"host":"host0","count":1}`)
		if code >= 300 {
			var env struct {
				Error *struct{ Code, Message string }
			}
			if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Message == "" || strings.Contains(env.Error.Message, "\n") {
				t.Fatalf("allocation refused (%d) without a one-line error envelope: %s", code, b)
			}
		}
		if err := m.Pool().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}
