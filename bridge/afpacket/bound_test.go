package afpacket

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
)

// await takes the value a goroutine sends on ch, failing the test when
// none came within waitfor.Stall; what names it.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitfor.Stall):
		t.Fatalf("%s: nothing came within %v", what, waitfor.Stall)
		panic("unreachable")
	}
}
