package manager_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode"
)

// TestErrorsEchoOneLineOfTheRequest: what an error repeats of the request
// is one line with no control characters, however the request spelled
// it. A path with an escaped carriage return and terminal escape
// (%0D%1B[2J) came back inside "no route ..." as it was: writeError turned
// line feeds into "; " and nothing else, so a client that printed the
// message wrote them to its terminal.
func TestErrorsEchoOneLineOfTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, path := range []string{
		"/no/such/route%0D%1B[2Jcleared",
		"/no/such/route%E2%80%A8next%09tab",
		"/v1/boxes/" + strings.Repeat("x", 200) + "%0D%1B[2J",
	} {
		status, body := call(t, e.srv, "GET", path, token, "")
		if status != http.StatusNotFound {
			t.Errorf("GET %.60s: %d, want 404", path, status)
			continue
		}
		_, msg := apiErr(t, body)
		for _, r := range msg {
			if r != ' ' && (unicode.IsControl(r) || unicode.IsSpace(r)) {
				t.Errorf("GET %.60s: message %q holds %U", path, msg, r)
				break
			}
		}
	}
}
