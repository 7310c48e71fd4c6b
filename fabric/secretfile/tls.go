package secretfile

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/dxpu/dxpu/fabric/oneline"
)

// maxKeyFile bounds the private key file LoadX509KeyPair reads: a PEM
// RSA key of 16384 bits is under 13 KiB.
const maxKeyFile = 1 << 20

// LoadX509KeyPair is tls.LoadX509KeyPair with the private key read through
// Open: keyFile (named by keyFlag, e.g. "--tls-key") is refused unless it
// is a regular file owned by this process's user that group and others
// cannot access, as every secret file; certFile (certFlag), a certificate
// chain, is public and read as it is. Errors are one line naming the flag
// and the file at fault; a refusal of the key is an *Error.
func LoadX509KeyPair(certFlag, certFile, keyFlag, keyFile string) (tls.Certificate, error) {
	keyPEM, err := readKeyFile(keyFlag, keyFile, maxKeyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	defer clear(keyPEM) // the parsed key is all that is kept
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, after the flag
		}
		return tls.Certificate{}, fmt.Errorf("%s %s: %w", certFlag, oneline.Name(certFile), err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s, %s %s: %w", certFlag, oneline.Name(certFile), keyFlag, oneline.Name(keyFile), err)
	}
	return cert, nil
}

// readKeyFile reads the private key file path whole (Open's checks),
// refusing one over max bytes.
func readKeyFile(flag, path string, max int) ([]byte, error) {
	f, err := Open(flag, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		clear(b)
		return nil, &Error{flag, path, err.Error(), err}
	}
	if len(b) > max {
		clear(b)
		return nil, fmt.Errorf("%s %s: larger than %d bytes; it should hold one PEM private key", flag, oneline.Name(path), max)
	}
	return b, nil
}
