package capture

import (
	"context"
	"fmt"

	"github.com/dxpu/dxpu/tlp/pcapio"
)

// openRewrite opens the Ethernet capture in and starts out for a command
// that rewrites one into the other (convert, unseal): pcapng if asked, the
// input's timestamp resolution unless nanos says otherwise. The caller
// closes the reader, defers out's abort and commits it on success. secret:
// out is as secret as keys (unseal's plain frames): createSecretOutput.
func openRewrite(in, out string, pcapNG bool, nanos *bool, secret bool) (*pcapio.Reader, *output, error) {
	r, err := pcapio.OpenEthernet(in)
	if err != nil {
		return nil, nil, failedIfLinkType(err)
	}
	ns := r.Nanos()
	if nanos != nil {
		ns = *nanos
	}
	create := createOutput
	if secret {
		create = createSecretOutput
	}
	w, err := create(out, pcapio.WriterOptions{PcapNG: pcapNG, Nanos: ns})
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, w, nil
}

// checkEvery is how many frames a loop handles between looks at its
// context: often enough for Ctrl-C to feel immediate, rarely enough to
// cost nothing.
const checkEvery = 1024

// interrupted returns the error of a command whose context ended after n
// frames (nil while it runs): its output is dropped, not left half
// written.
func interrupted(ctx context.Context, cmd, out string, n int) error {
	if n%checkEvery != 0 || ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: interrupted after %d frames, left as it was: %w", cmd, out, n, ctx.Err())
}
