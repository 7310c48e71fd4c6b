package qemuproxy

import (
	"errors"
	"io"
	"syscall"
)

// ErrQEMUGone is QEMU's end of the socket vanishing where the protocol
// does not allow it: in the middle of a message, or while the guest's
// vCPU waited for the answer to its access (QEMU was killed, or crashed).
// A close between messages is not an error (see Server.Run): QEMU closes
// the socket the same way when the device is unplugged or QEMU quits.
var ErrQEMUGone = errors.New("qemuproxy: QEMU went away")

// peerGone reports whether err is the socket's peer having gone: a
// stream cut short, a reset (QEMU died with our answer unread), a broken
// pipe (it died before we answered).
func peerGone(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
