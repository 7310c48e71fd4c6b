package capture

import (
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/dxpu/dxpu/fabric/oneline"
	"io"
	"slices"
	"strings"
)

// InfoJSON is what `dxpu pcap info --json` prints for a capture: for one
// capture an indented object, for several one object per line (JSON
// lines); counts are frames or TLPs as the key says.
type InfoJSON struct {
	File             string         `json:"file"`
	Frames           int            `json:"frames"`
	BadFrames        int            `json:"bad_frames"`
	SnaplenCutFrames int            `json:"snaplen_cut_frames"` // cut by the snap length before the end of their headers
	VLANTaggedFrames int            `json:"vlan_tagged_frames"`
	SealedFrames     int            `json:"sealed_frames"`
	FramesByEncap    map[string]int `json:"frames_by_encap"`
	MessagesByType   map[string]int `json:"messages_by_type"`
	TLPs             int            `json:"tlps"`
	TruncatedTLPs    int            `json:"truncated_tlps"`
	TLPsByKind       map[string]int `json:"tlps_by_kind"`
}

// infoOf sorts Tally's counts into their groups.
func infoOf(path string, s map[string]int) InfoJSON {
	in := InfoJSON{File: path, Frames: s["frames"], BadFrames: s["bad"], SnaplenCutFrames: s["snaplen-cut"], VLANTaggedFrames: s["vlan-tagged"], SealedFrames: s["sealed"],
		TruncatedTLPs: s["truncated"], FramesByEncap: map[string]int{}, MessagesByType: map[string]int{}, TLPsByKind: map[string]int{}}
	for k, n := range s {
		switch {
		case strings.HasPrefix(k, "encap:"):
			in.FramesByEncap[k[len("encap:"):]] = n
		case strings.HasPrefix(k, "msg:"):
			in.MessagesByType[k[len("msg:"):]] = n
		case strings.HasPrefix(k, "kind:"):
			in.TLPsByKind[k[len("kind:"):]] = n
			in.TLPs += n
		}
	}
	return in
}

// writeInfo prints one capture's counts: a JSON object (indented when it
// is the only one, else on one line), or a block of labelled lines with
// the largest counts first.
func writeInfo(w io.Writer, path string, s map[string]int, asJSON, only bool) error {
	in := infoOf(path, s)
	if asJSON {
		enc := json.NewEncoder(w)
		if only {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(in)
	}
	fmt.Fprintf(w, "%s\n", oneline.Name(path)) // a name with a line break or an escape, quoted
	cut := ""
	if in.SnaplenCutFrames > 0 {
		cut = fmt.Sprintf(", %d cut by the snap length within their headers", in.SnaplenCutFrames)
	}
	fmt.Fprintf(w, "  %-16s %d (%d VLAN-tagged, %d sealed%s, %d did not parse)\n", "frames", in.Frames, in.VLANTaggedFrames, in.SealedFrames, cut, in.BadFrames)
	fmt.Fprintf(w, "  %-16s %s\n", "encapsulations", counts(in.FramesByEncap, 0))
	fmt.Fprintf(w, "  %-16s %s\n", "messages", counts(in.MessagesByType, 0))
	fmt.Fprintf(w, "  %-16s %d (%d cut by the snap length)\n", "TLPs", in.TLPs, in.TruncatedTLPs)
	if len(in.TLPsByKind) > 0 {
		fmt.Fprintf(w, "  %-16s %s\n", "TLPs by kind", counts(in.TLPsByKind, 6))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// counts lists name count pairs, the largest count first (ties by
// name), perLine to a line (0: all on one), or "none".
func counts(m map[string]int, perLine int) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var sb strings.Builder
	for i, k := range names {
		switch {
		case i == 0:
		case perLine > 0 && i%perLine == 0:
			sb.WriteString(",\n" + strings.Repeat(" ", 19))
		default:
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %d", k, m[k])
	}
	return sb.String()
}
