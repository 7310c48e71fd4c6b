package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// MountDir is where named namespaces are bind-mounted, as iproute2 does.
const MountDir = "/run/netns"

// ErrClosed is returned by the methods of a namespace after Close.
var ErrClosed = errors.New("netns: namespace closed")

// NS is a network namespace this package made. Its methods are safe for
// concurrent use.
type NS struct {
	// Name labels the namespace in errors; for a named namespace it is
	// also the file under MountDir.
	Name string
	// Handle is an open descriptor of the namespace (netlink.NsFd(Handle)
	// moves a link into it); valid until Close.
	Handle vnetns.NsHandle

	named bool
	nl    *netlink.Handle

	mu     sync.Mutex
	links  []string // made by AddVeth here, deleted by Close
	closed bool
}

// New creates an anonymous network namespace with its loopback interface
// up. name only labels it in errors.
func New(name string) (*NS, error) {
	return create(name, false)
}

// NewNamed creates a network namespace that `ip netns` sees as name (a
// bind mount at MountDir/name), with its loopback interface up. It fails
// if the name is taken; Close removes the mount.
func NewNamed(name string) (*NS, error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return nil, fmt.Errorf("netns: namespace name %q: want a plain file name", name)
	}
	return create(name, true)
}

func create(name string, named bool) (*NS, error) {
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, left in the new namespace, exits
		// with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- result{-1, fmt.Errorf("netns: creating %s: unshare: %w", name, err)}
			return
		}
		h, err := vnetns.Get()
		if err != nil {
			done <- result{-1, fmt.Errorf("netns: creating %s: %w", name, err)}
			return
		}
		if named {
			if err := mount(name); err != nil {
				h.Close()
				done <- result{-1, err}
				return
			}
		}
		done <- result{h, nil}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	ns := &NS{Name: name, Handle: r.h, named: named}
	var err error
	if ns.nl, err = netlink.NewHandleAt(r.h); err != nil {
		ns.release()
		return nil, fmt.Errorf("netns: netlink socket in %s: %w", name, err)
	}
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		ns.release()
		return nil, fmt.Errorf("netns: setting lo up in %s: %w", name, err)
	}
	return ns, nil
}

// mount bind-mounts the calling thread's namespace at MountDir/name.
func mount(name string) error {
	if err := os.MkdirAll(MountDir, 0o755); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	p := filepath.Join(MountDir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("netns: naming namespace %s: %w", name, err)
	}
	f.Close()
	src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
	if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
		os.Remove(p)
		return fmt.Errorf("netns: bind-mounting namespace %s at %s: %w", name, p, err)
	}
	return nil
}

// Do runs fn on an OS thread inside the namespace and returns its error.
// The thread is discarded afterwards. Sockets fn opens stay in the
// namespace; goroutines fn starts run outside it.
func (ns *NS) Do(fn func() error) error {
	ns.mu.Lock()
	closed := ns.closed
	ns.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %s", ErrClosed, ns.Name)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := ns.Enter(); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Enter moves the calling thread into the namespace. The caller has
// locked its goroutine to the thread (runtime.LockOSThread) and must
// never unlock it: the thread then ends with the goroutine instead of
// running other goroutines in the namespace. For work that must outlive
// Do's call on the same thread, such as a child whose parent-death signal
// follows the thread that forked it (childproc.Start).
func (ns *NS) Enter() error {
	ns.mu.Lock()
	closed := ns.closed
	ns.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %s", ErrClosed, ns.Name)
	}
	if err := vnetns.Set(ns.Handle); err != nil {
		return fmt.Errorf("netns: entering %s: %w", ns.Name, err)
	}
	return nil
}

// Netlink returns a netlink handle that works inside the namespace, for
// what this package does not wrap (routes, neighbours); valid until Close.
func (ns *NS) Netlink() *netlink.Handle { return ns.nl }

// Close deletes the links AddVeth made in the namespace and lets go of it
// (removing its name, if it has one). The kernel destroys the namespace
// once no process, socket or descriptor holds it any more. Closing twice
// is harmless.
func (ns *NS) Close() error {
	ns.mu.Lock()
	if ns.closed {
		ns.mu.Unlock()
		return nil
	}
	ns.closed = true
	links := ns.links
	ns.links = nil
	ns.mu.Unlock()
	var errs []error
	for i := len(links) - 1; i >= 0; i-- {
		if err := ns.deleteLink(links[i]); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, ns.release())
	return errors.Join(errs...)
}

// deleteLink deletes a link by name; one already gone (its peer's
// namespace went first) is no error.
func (ns *NS) deleteLink(name string) error {
	l, err := ns.nl.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil
	}
	if err == nil {
		err = ns.nl.LinkDel(l)
	}
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("netns: deleting %s in %s: %w", name, ns.Name, err)
	}
	return nil
}

// release closes the netlink socket and the descriptor and removes the
// name.
func (ns *NS) release() error {
	if ns.nl != nil {
		ns.nl.Close()
	}
	var errs []error
	if err := ns.Handle.Close(); err != nil {
		errs = append(errs, fmt.Errorf("netns: closing %s: %w", ns.Name, err))
	}
	if ns.named {
		p := filepath.Join(MountDir, ns.Name)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("netns: unmounting %s: %w", p, err))
		} else if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("netns: %w", err))
		}
	}
	return errors.Join(errs...)
}
