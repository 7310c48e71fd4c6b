//go:build !linux

package nettlp

// batchSys without sendmmsg: one Send per datagram.
type batchSys struct{}

func (s *batchSys) init(*Transport) {}

func (s *batchSys) send(t *Transport, msgs []batchMsg) (int, error) {
	for i, m := range msgs {
		t.sendCalls.Add(1)
		if err := t.sendNumbered(m.port, m.dst, m.f); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}
