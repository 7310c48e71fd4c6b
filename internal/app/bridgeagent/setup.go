package bridgeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/jsonfile"
	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Setup is what `dxpu bridge agent` gives as text and files; Apply turns
// it into Options.
type Setup struct {
	Role           string // host or gpu
	Listen, Switch string // IP:PORT; Switch may be empty
	CredentialFile string
	BoxFile        string // --role gpu: the box JSON ("-": Stdin)
	MemBase        string
	MemSize        string
	// VM (--vm): the host is a QEMU guest with VMOptions (the flags of
	// `dxpu vm run`).
	VM        bool
	VMOptions vm.Options
	Stdin     io.Reader
	// MPSGiven says --mps was on the command line: it shapes a memory
	// device's completions (--role gpu --pcie memory) and nothing else.
	MPSGiven bool
}

// Apply checks s and fills in o's role, addresses, credential, box and
// memory window; its errors are apperr.ErrUsage and name the flag.
func (s Setup) Apply(o *Options) error {
	usage := apperr.Usage
	var ok bool
	if o.Role, ok = encap.ParseRole(s.Role); !ok {
		return usage(fmt.Errorf("--role %q: want host or gpu", s.Role))
	}
	var err error
	if o.Listen, err = netip.ParseAddrPort(s.Listen); err != nil {
		return usage(fmt.Errorf("--listen %q: want IP:PORT: %w", s.Listen, err))
	}
	if s.Switch != "" {
		if o.Switch, err = netip.ParseAddrPort(s.Switch); err != nil {
			return usage(fmt.Errorf("--switch %q: want IP:PORT: %w", s.Switch, err))
		}
	}
	if s.CredentialFile == "" {
		return usage(errors.New("--agent-credential-file is required: the credential 'dxpu ctl box|host add --agent-credential-out FILE' wrote"))
	}
	if o.Credential, err = manager.LoadTokenFileFor("--agent-credential-file", s.CredentialFile); err != nil {
		return usage(err)
	}
	if s.BoxFile != "" {
		if o.Role != bridge.RoleGPU {
			return usage(errors.New("--box is for --role gpu"))
		}
		b, err := jsonfile.Read[pool.Box](s.Stdin, s.BoxFile)
		if err != nil {
			return fmt.Errorf("--box: %w", err)
		}
		// The agent serves only the box's GPUs: with none it would refuse
		// every pair while looking up.
		if len(b.GPUs) == 0 {
			return usage(fmt.Errorf("--box: %s: gpus is empty: expected the box's GPUs (gpus[].id, gpus[].model, ...), as given to ctl box add", s.BoxFile))
		}
		o.Box = &b
	}
	if s.VM {
		if o.Role != bridge.RoleHost {
			return usage(errors.New("--vm is for --role host: the guest is the host that borrows GPUs"))
		}
		if err := checkGuest(s.VMOptions); err != nil {
			return usage(err)
		}
		vo := s.VMOptions
		o.VM = &vo
	}
	if o.MemBase, err = bytesize.Parse("mem-base", s.MemBase); err != nil {
		return usage(err)
	}
	if o.MemSize, err = bytesize.Parse("mem-size", s.MemSize); err != nil {
		return usage(err)
	}
	if err := bridged.CheckMemory(o.MemBase, o.MemSize, s.MemBase, s.MemSize); err != nil {
		return usage(err)
	}
	z := bridged.Sizes{MTU: o.MTU, MaxPayload: o.MaxPayload, MPS: o.MPS, MPSGiven: s.MPSGiven,
		MTULimit: udp.MuxMaxFrame, MTUWhy: "the data plane's receive buffers",
		Memory: o.Role == bridge.RoleGPU && o.PCIe == PCIeMemory, Side: fmt.Sprintf("%q", o.PCIe)}
	if o.Role == bridge.RoleHost {
		z.Side = "--role host"
	}
	if err := z.Check(); err != nil {
		return usage(err)
	}
	return nil
}

// checkGuest checks the guest flags as `dxpu vm run` does.
func checkGuest(o vm.Options) error {
	switch {
	case o.MemoryMB != 0 && (o.MemoryMB < 128 || o.MemoryMB > 64<<10):
		return fmt.Errorf("--memory-mb %d: want 128..65536", o.MemoryMB)
	case o.Machine != "" && o.Machine != "q35" && o.Machine != "pc":
		return fmt.Errorf("--machine %q: want q35 or pc", o.Machine)
	case o.Accel != "" && o.Accel != "kvm" && o.Accel != "tcg":
		return fmt.Errorf("--accel %q: want kvm or tcg", o.Accel)
	}
	return nil
}

// CatchHUP catches SIGHUP from now on, before the agent starts: its
// default action ends the process, and a VM host's start (its guest's
// boot) takes seconds, in which an operator may rotate the credential.
// Hand the channel to ReloadCredentialOnHUP, which reloads at once for one
// caught before.
func CatchHUP() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// ReloadCredentialOnHUP re-reads the credential file on each SIGHUP of hup
// (from CatchHUP; after a re-registration with a new agent_url issued
// another) until ctx ends, the agent API's --agent-cert and --agent-key
// when it serves https, and --manager-ca-file when given (after a
// rotation). What fails to load is one error line and the one read
// before stays in use.
func ReloadCredentialOnHUP(ctx context.Context, hup chan os.Signal, a *Agent, path string, log *slog.Logger) {
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if c, err := manager.LoadTokenFileFor("--agent-credential-file", path); err != nil {
				log.Error("SIGHUP: credential not reloaded", "err", err)
			} else {
				a.SetCredential(c)
				log.Info("SIGHUP: agent credential reloaded", "file", path)
			}
			if k := a.apiCert.Load(); k != nil {
				_ = k.ReloadAndLog(log, "SIGHUP") // logged; a failure is not fatal
			}
			if a.rep != nil && a.rep.cas != nil {
				_ = a.rep.cas.ReloadAndLog(log, "SIGHUP")
			}
		case <-ctx.Done():
			return
		}
	}
}
