package bridgeagent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The copy check moves bytes through a live pair from outside, for tests
// and dxpu chaos: the host writes them into the lent GPU's VRAM through
// BAR1 and reads them back, both over the fabric.
//
//	POST /agent/v1/pairs/{id}/copy-check   {"offset":4096,"data":"<base64>"}
//	Authorization: Bearer <the agent's credential>
//	200 {"pair":7,"offset":4096,"data":"<base64 of what was read back>"}

// MaxCopyCheck is the most bytes one copy check moves.
const MaxCopyCheck = 64 << 10

// ErrNoCopyCheck: the host side cannot reach the GPU's memory this way (a
// QEMU guest host; a GPU box's agent).
var ErrNoCopyCheck = errors.New("this agent's host side has no copy check (emulated hosts only)")

type copyChecker interface {
	copyCheck(ctx context.Context, port int, pair uint32, offset uint64, data []byte) ([]byte, error)
}

// CopyCheck writes data at offset into the VRAM of pair's GPU and returns
// what reads back from there.
func (a *Agent) CopyCheck(ctx context.Context, pair uint32, offset uint64, data []byte) ([]byte, error) {
	cc, ok := a.host.(copyChecker)
	if !ok {
		return nil, ErrNoCopyCheck
	}
	a.mu.Lock()
	pr, found := a.pairs[pair]
	a.mu.Unlock()
	if !found {
		return nil, fmt.Errorf("pair %d: %w", pair, ErrNoPair)
	}
	return cc.copyCheck(ctx, pr.p.HostPort, pair, offset, data)
}

func (h *emuHost) copyCheck(ctx context.Context, port int, pair uint32, offset uint64, data []byte) ([]byte, error) {
	out := make([]byte, 0, len(data))
	err := h.do(ctx, func() error {
		cur := h.Slots()[port]
		h.mu.Lock()
		base, ok := h.bar1[port]
		h.mu.Unlock()
		if !h.sw.Occupied(port) || cur.Pair != pair || !ok {
			return fmt.Errorf("pair %d: no GPU enumerated on host port %d", pair, port)
		}
		if err := h.rc.MMIOWrite(base+offset, data); err != nil {
			return fmt.Errorf("pair %d: write: %w", pair, err)
		}
		// Reads do not pass posted writes: what reads back went through
		// the pair both ways.
		for off := 0; off < len(data); {
			n := min(len(data)-off, 128, int(4096-(base+offset+uint64(off))%4096))
			done := false
			var rerr error
			h.rc.MMIOReadAsync(base+offset+uint64(off), n, func(b []byte, err error) {
				out, rerr, done = append(out, b...), err, true
			})
			if !h.rc.RunWhile(func() bool { return !done }) && rerr == nil {
				rerr = errors.New("no completion")
			}
			if rerr != nil {
				return fmt.Errorf("pair %d: read at %#x: %w", pair, offset+uint64(off), rerr)
			}
			off += n
		}
		return nil
	})
	return out, err
}

// serveCopyCheck serves POST /agent/v1/pairs/{id}/copy-check.
func (a *Agent) serveCopyCheck(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if want := a.credential(); !ok || want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
		fail(http.StatusUnauthorized, "unauthorized", "the copy check needs this agent's credential (Authorization: Bearer ...)")
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 24)
	if err != nil || id == 0 {
		fail(http.StatusBadRequest, "bad_request", fmt.Sprintf("path pair id %q: want 1..16777215", r.PathValue("id")))
		return
	}
	var body struct {
		Offset uint64 `json:"offset"`
		Data   []byte `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2*MaxCopyCheck)).Decode(&body); err != nil {
		fail(http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	if len(body.Data) == 0 || len(body.Data) > MaxCopyCheck || body.Offset > 1<<30 {
		fail(http.StatusBadRequest, "bad_request", fmt.Sprintf("data: want 1..%d bytes (base64) at an offset under 1 GiB, got %d at %d", MaxCopyCheck, len(body.Data), body.Offset))
		return
	}
	got, err := a.CopyCheck(r.Context(), uint32(id), body.Offset, body.Data)
	switch {
	case errors.Is(err, ErrNoCopyCheck):
		fail(http.StatusNotImplemented, "not_implemented", err.Error())
		return
	case errors.Is(err, ErrNoPair):
		fail(http.StatusNotFound, "not_found", err.Error())
		return
	case err != nil:
		fail(http.StatusBadGateway, "copy_failed", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pair": id, "offset": body.Offset, "data": got})
}
