package capture

import "github.com/dxpu/dxpu/tlp/pcapio"

// openRewrite opens the Ethernet capture in and creates out for a command
// that rewrites one into the other (convert, unseal): pcapng if asked, the
// input's timestamp resolution unless nanos says otherwise. The caller
// closes both.
func openRewrite(in, out string, pcapNG bool, nanos *bool) (*pcapio.Reader, *pcapio.Writer, error) {
	r, err := pcapio.OpenEthernet(in)
	if err != nil {
		return nil, nil, failedIfLinkType(err)
	}
	ns := r.Nanos()
	if nanos != nil {
		ns = *nanos
	}
	w, err := pcapio.Create(out, pcapio.WriterOptions{PcapNG: pcapNG, Nanos: ns})
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, w, nil
}
