package switching_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/privtest"
)

// TestReadFrameRefusesSmallHeadroom: ReadFrame needs room to re-insert a
// stripped tag before the frame; less is an error, not a read.
func TestReadFrameRefusesSmallHeadroom(t *testing.T) {
	privtest.Root(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	s, err := switching.OpenPacketSocket(lo.Index)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 2048)
	for _, h := range []int{0, 3} {
		if _, _, err := s.ReadFrame(buf, h); err == nil || errors.Is(err, switching.ErrTimeout) || !strings.Contains(err.Error(), "headroom") {
			t.Errorf("ReadFrame with %d bytes of headroom: %v, want the headroom error", h, err)
		}
	}
	if _, _, err := s.ReadFrame(buf, len(buf)); err == nil || !strings.Contains(err.Error(), "headroom") {
		t.Errorf("ReadFrame with all the buffer as headroom: %v, want the headroom error", err)
	}
}
