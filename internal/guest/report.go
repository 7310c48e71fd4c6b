package guest

// Report is what `dxpu-guest run` prints (see the package doc).
type Report struct {
	PCI []Function `json:"pci"`
	// GPU is the function driven; Config its config space as sysfs gave it
	// (hex), ConfigSize how many bytes that was. Keys carry their unit, as
	// dxpu help units says (they were config_size, bytes and seconds).
	GPU        string `json:"gpu,omitempty"`
	Config     string `json:"config,omitempty"`
	ConfigSize int    `json:"config_bytes,omitempty"`
	Boot0      string `json:"boot0,omitempty"`
	// Bytes is the size of each copy, Chunks the physically contiguous
	// pieces it was cut into (one COPY command each).
	Bytes  uint64 `json:"copy_bytes,omitempty"`
	Chunks int    `json:"chunks,omitempty"`
	// H2DOK: every host-to-device copy completed; D2HOK: what came back
	// equals what was sent, byte for byte; SrcCRC32C: the sent bytes'
	// CRC-32C, to check the GPU's memory against.
	H2DOK        bool    `json:"h2d_ok"`
	D2HOK        bool    `json:"d2h_ok"`
	SrcCRC32C    string  `json:"src_crc32c,omitempty"`
	LaunchSyncOK bool    `json:"launch_sync_ok"`
	MMIOReadUS   Latency `json:"mmio_read_us"`
	H2DGbps      float64 `json:"h2d_gbps"`
	D2HGbps      float64 `json:"d2h_gbps"`
	// Removed: the function disappeared from sysfs after the work, as
	// waited for with Options.WaitRemoval.
	Removed bool `json:"removed,omitempty"`
	// Seconds is the tool's own run time.
	Seconds float64 `json:"duration_s"`
	Error   string  `json:"error,omitempty"`
}

// Latency is the mean time of one MMIO read, in microseconds, of BOOT_0
// and of SCRATCH.
type Latency struct {
	Boot0   float64 `json:"boot0"`
	Scratch float64 `json:"scratch"`
	Samples int     `json:"samples"`
}

// Console markers around the report and before each event line.
const (
	EventPrefix = "DXPU-EVENT "
	ResultBegin = "DXPU-RESULT-BEGIN"
	ResultEnd   = "DXPU-RESULT-END"
)
