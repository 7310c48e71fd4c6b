package manager

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPIErrorIsOneLine: a saga whose undo failed too joins its errors
// with newlines; the API's message is one line, as a client prints it.
func TestAPIErrorIsOneLine(t *testing.T) {
	err := errors.Join(&StepError{Step: "gpu-bridge", Pair: 7, Err: errors.New("agent: http_404")},
		errors.New("undo host-bridge: agent: http_404"))
	rec := httptest.NewRecorder()
	writeError(rec, apiErrorOf(err))
	var body struct{ Error APIError }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if m := body.Error.Message; strings.Contains(m, "\n") || !strings.Contains(m, "; undo host-bridge") {
		t.Fatalf("message %q: want the errors on one line, joined by \"; \"", m)
	}
}
