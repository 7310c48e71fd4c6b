package vmm

import (
	"strings"
	"testing"
	"time"
)

// TestErrorsWriteUs: the port's errors name its completion timeout as
// `dxpu help units` spells durations (500us, never Go's 500µs): the
// guest's failed read and the refused config reach the VM's log.
func TestErrorsWriteUs(t *testing.T) {
	t.Parallel()
	var ram GuestRAM
	if _, err := NewPort(Config{CompletionTimeout: -5 * time.Microsecond}, &ram); err == nil || !strings.HasSuffix(err.Error(), "completion timeout -5us") {
		t.Errorf("a negative completion timeout: %v, want it refused as -5us", err)
	}
	p, err := NewPort(Config{BARs: h100BARs, CompletionTimeout: 500 * time.Microsecond}, &ram)
	if err != nil {
		t.Fatal(err)
	}
	begin(t, p, Access{Op: CfgRead, Addr: 0, Size: 4})
	a := p.Expire(time.Millisecond)
	if !a.Done || a.Err == nil || !strings.HasSuffix(a.Err.Error(), "no completion within 500us") {
		t.Errorf("an unanswered read: %+v, want it failed after 500us", a)
	}
}
