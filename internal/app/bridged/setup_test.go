package bridged

import (
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/apperr"
)

// TestSetupApply: good settings fill in Options; each bad one is a usage
// error naming its flag.
func TestSetupApply(t *testing.T) {
	t.Parallel()
	good := Setup{Role: "gpu", Listen: "127.0.0.1:7001", Peer: "127.0.0.1:7002", PCIe: "memory", GPUModel: "a100",
		MemBase: "0x1000", MemSize: "64K", SealMode: "gmac", Doorbell: "0x2000"}
	o := Options{Insecure: true}
	if err := good.Apply(&o); err != nil {
		t.Fatal(err)
	}
	if o.Role != bridge.RoleGPU || o.Listen.Port() != 7001 || o.Peer.Port() != 7002 || o.SealMode != seal.ModeGMAC ||
		o.MemBase != 0x1000 || o.MemSize != 64<<10 || o.Doorbell == nil || *o.Doorbell != 0x2000 || !strings.Contains(strings.ToLower(o.GPUModel.Name), "a100") {
		t.Fatalf("%+v", o)
	}
	if o.EtherDriver != EtherAFPacket {
		t.Fatalf("ether driver %q, want afpacket by default", o.EtherDriver)
	}
	eth := good
	eth.Listen, eth.Peer, eth.Ether, eth.EtherDriver = "", "", "dx0:02:00:00:00:00:01", "afxdp"
	if o := (Options{Insecure: true}); eth.Apply(&o) != nil || o.EtherIface != "dx0" || o.EtherDriver != EtherAFXDP {
		t.Fatalf("--ether with --ether-driver afxdp: %+v", o)
	}
	for want, bad := range map[string]func(*Setup){
		"--role":                           func(s *Setup) { s.Role = "middle" },
		"--listen":                         func(s *Setup) { s.Listen = "x" },
		"--peer":                           func(s *Setup) { s.Peer = "y" },
		"--pcie":                           func(s *Setup) { s.PCIe = "pci" },
		"--gpu-model":                      func(s *Setup) { s.GPUModel = "v100" },
		"--seal-mode":                      func(s *Setup) { s.SealMode = "none" },
		"--mem-base":                       func(s *Setup) { s.MemBase = "low" },
		"--mem-size":                       func(s *Setup) { s.MemSize = "lots" },
		"exclude each":                     func(s *Setup) { s.KeyFile = "/nonexistent" },
		"--doorbell 0x11000":               func(s *Setup) { s.Doorbell = "0x11000" }, // outside the memory
		"--doorbell 0x2010":                func(s *Setup) { s.Doorbell = "0x2010" },  // not 64-byte aligned
		"(--pcie memory)":                  func(s *Setup) { s.PCIe = "emu-gpu"; s.Doorbell = "0x2000" },
		"--ether-driver":                   func(s *Setup) { s.EtherDriver = "dpdk" },
		"needs --ether":                    func(s *Setup) { s.EtherDriver = "afxdp" },
		"--listen and --peer are required": func(s *Setup) { s.Listen, s.Peer = "", "" },
	} {
		s := good
		bad(&s)
		o := Options{Insecure: true}
		if err := s.Apply(&o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error naming it", want, err)
		}
	}
}

// TestSetupSizes: --mtu, --max-payload and --mps are checked against each
// other and the PCIe side, each bad one a usage error naming its flag.
func TestSetupSizes(t *testing.T) {
	t.Parallel()
	good := Setup{Role: "gpu", Listen: "127.0.0.1:7001", Peer: "127.0.0.1:7002", PCIe: "memory", GPUModel: "h100",
		MemBase: "0x1000", MemSize: "64K", SealMode: "gcm", MPSGiven: true}
	for _, ok := range []Options{{MTU: 8972, MaxPayload: 2048, MPS: 2048}, {MPS: 512}, {MTU: 65507, MaxPayload: 4096, MPS: 4096}} {
		o := ok
		o.Insecure = true
		if err := good.Apply(&o); err != nil || o.MTU != ok.MTU || o.MPS != ok.MPS || o.MaxPayload != ok.MaxPayload {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	// --mps's default means nothing to a host side, whatever --max-payload.
	host := good
	host.Role, host.PCIe, host.MPSGiven = "host", "nettlp:127.0.0.2:127.0.0.1", false
	if o := (Options{Insecure: true, MPS: 256, MaxPayload: 128}); host.Apply(&o) != nil {
		t.Errorf("host side with --max-payload 128: %v", host.Apply(&o))
	}
	for _, c := range []struct {
		want string
		s    func(*Setup)
		o    Options
	}{
		{"--mtu 65508", nil, Options{MTU: 65508}},
		{"--max-payload 513", nil, Options{MaxPayload: 513}},
		{"--max-payload 8192", nil, Options{MaxPayload: 8192}},
		{"--mps 384", nil, Options{MPS: 384}},
		{"--mps 64", nil, Options{MPS: 64}},
		{"--mps 1024 exceeds --max-payload 512", nil, Options{MPS: 1024}},
		{"--mps 512 exceeds --max-payload 256", nil, Options{MPS: 512, MaxPayload: 256}},
		{"not \"emu-gpu\"", func(s *Setup) { s.PCIe = "emu-gpu" }, Options{MPS: 256}},
	} {
		s := good
		if c.s != nil {
			c.s(&s)
		}
		o := c.o
		o.Insecure = true
		if err := s.Apply(&o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a usage error naming it", c.want, err)
		}
	}
}
