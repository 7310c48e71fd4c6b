package nettlpside
import ("testing";"net/netip";"github.com/dxpu/dxpu/bridge/nettlp")
func TestDbg(t *testing.T){
	tr, err := nettlp.Listen(nettlp.TransportConfig{Local: netip.MustParseAddr("127.0.45.1")})
	if err != nil { t.Fatal(err) }
	defer tr.Close()
	c, err := nettlp.Dial(netip.MustParseAddr("127.0.45.2"), netip.MustParseAddr("127.0.45.1"), 3, 0)
	t.Log(c, err)
	c2, err := nettlp.Dial(netip.MustParseAddr("127.0.45.5"), netip.MustParseAddr("127.0.45.1"), 4, 0)
	t.Log(c2, err)
}
