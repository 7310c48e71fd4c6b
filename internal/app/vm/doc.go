// Package vm boots a real Linux guest under QEMU that borrows remote GPUs:
// the launcher behind `dxpu vm`. Each GPU lent to the guest is a QEMU
// proxy PCI device (x-pci-proxy-dev, QEMU 5.2 to 10.x) whose socket a
// qemuproxy.Server serves in this process, through a vmm.Port into a
// host-side bridge, over the network to the GPU-side bridge and the GPU.
// The guest's RAM is a shared memfd, so the GPU's DMA lands in it
// directly; the guest drives the GPU with dxpu-guest (cmd/dxpu-guest),
// which runs the emulator's own driver code (emu/gpudrv) over sysfs.
//
// # The pair's path
//
// Demo (`dxpu vm demo`) carries the bridge pair over a Link: as root
// NetnsXDP, where the host-side bridge's UDP socket lives in one network
// namespace and the GPU-side bridge's in another, joined only through a
// third running the dxpu XDP switch (package labnet); otherwise, or asked
// to, Loopback (UDP on 127.0.0.1). Only the two sockets move: QEMU and
// every goroutine stay in the caller's namespace, since a socket keeps the
// namespace it was opened in. The result names the path and, through the
// switch, what it forwarded of the pair each way. TestThroughXDPSwitch
// runs the same checks through the test rig's switch, once lossless and
// once with the switch dropping 1% of the pair's frames (drop_ppm), and a
// hot-added GPU whose pair leaves the switch's table mid-copy.
//
// QEMU dies with dxpu: it is started by childproc.Start, from a thread
// kept for it, since its parent-death signal follows the forking thread
// and namespace work ends the threads it locks.
//
// # The guest
//
// QEMU runs the Debian cloud kernel (linux-image-cloud-amd64: PCI, serial
// console, devtmpfs, hugetlbfs built in) with an initramfs written on the
// fly (a newc cpio, gzipped): a static busybox (busybox-static) with a few
// applet links, dxpu-guest, /dev/console, and an /init that mounts proc,
// sys, devtmpfs and hugetlbfs, runs `dxpu-guest run --console` and powers
// off. The console is ttyS0 on QEMU's stdout, copied to a log file and
// followed for the tool's DXPU-EVENT lines and its report between
// DXPU-RESULT-BEGIN and DXPU-RESULT-END. KVM is used when /dev/kvm opens
// and a probe guest boots under it, else TCG (nested KVM can open and
// still fail: "KVM internal error" at the first instruction it must
// emulate). Machine q35 puts each GPU slot on a pcie-root-port with
// mem-reserve=64M (an empty port otherwise gets a window too small for
// BAR0 when a GPU is hot-added); machine pc puts GPUs on the root bus.
//
// # Hot-plug
//
// HotAdd starts the GPU's server on a new socketpair first (device_add's
// realize blocks QEMU's main loop on config reads only the server
// answers), passes QEMU's end with QMP getfd (SCM_RIGHTS on the same
// sendmsg) and plugs it with device_add (ACPI hot-plug). No firmware runs
// for a hot-added function: the guest enables it (sysfs enable; dxpu-guest
// does). HotRemove sends device_del, waits for DEVICE_DELETED and for the
// server to see QEMU close the socket.
//
// QMP commands carry ids: a reply is taken only by the command it answers
// (a late one, after a command timed out, is dropped, never handed to the
// next), and only the newest 1024 events (at most 1 MiB) are kept.
//
// # Where the guest's view differs from the GPU's
//
// Shown by TestDemo, which compares the config space the guest reads
// through sysfs with the GPU model's:
//
//   - BAR registers 0x10-0x20: the guest sees one 32-bit, non-prefetchable
//     16 MiB BAR0 placed by its firmware (e.g. 0xf6000000) in a shadow, and
//     no BAR1 or BAR3; the GPU's BAR0 stays at 0x9000_0000 and its 64-bit
//     BAR1 (128 GiB) and BAR3 (32 MiB) where the GPU side programmed them.
//     QEMU 7.2's proxy device sizes every BAR register as a separate 32-bit
//     BAR, so a 64-bit or 2 GiB-plus BAR cannot be presented.
//   - Extended config space (0x100-0xfff, the AER capability): not
//     visible. The proxy device is a conventional PCI function, so QEMU
//     answers config accesses past 0xff itself with all ones and Linux
//     reads 256 bytes.
//   - Interrupts: the MSI capability is there but MSI writes cannot be
//     delivered (the proxy protocol has no message for them; they are
//     counted), and INTx reaches the guest only with KVM's irqfd. The
//     guest polls a semaphore the GPU writes into its RAM.
//
// Everything else in the first 256 bytes (IDs, command and status,
// capabilities, interrupt line) is the GPU's own, read through the bridge.
//
// # Failure
//
// A guest access the GPU side does not answer (link down, GPU removed,
// completion timeout) reads all ones, as on a root complex; dxpu-guest
// treats an all-ones BOOT_0 as a device gone, reports the error and exits
// non-zero, and the guest powers off: no vCPU waits forever.
//
// The other way round, a QEMU that dies (killed, crashed) while the GPU
// copies into or out of the guest's RAM: its sockets close just as on a
// clean exit, so each lending holds a copy of QEMU's end of its socket and
// closes it only once QEMU's exit status is known. A death cancels the
// GPU's Serve with ErrGuestDied (naming the signal or status) as cause
// first: the server ends with that error, the host-side bridge stops (the
// GPU side sees the pair go down), the device's DMA that arrives after is
// dropped and counted (qemuproxy.ServerStats.DroppedAfterEnd), and Wait
// returns the same ErrGuestDied. TestGuestKilledWhileCopying. Everything
// Start began (QEMU's process group, the GPU servers) ends when its
// context ends or Close is called.
package vm
