package manager

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// Stable error codes of the API.
const (
	CodeBadRequest     = "bad_request"      // malformed JSON, unknown field, bad parameter
	CodeInvalid        = "invalid_argument" // well-formed but not acceptable
	CodeUnauthorized   = "unauthorized"     // no token, or not one the manager knows
	CodeForbidden      = "forbidden"        // a known token whose role does not allow the call
	CodeNotFound       = "not_found"
	CodeExists         = "already_exists"
	CodeInsufficient   = "insufficient_gpus"
	CodeNoHostPorts    = "no_host_ports"
	CodeInUse          = "in_use"
	CodeConflict       = "conflict"
	CodeBusy           = "busy"
	CodeNotLeader      = "not_leader"
	CodeAgentFailed    = "agent_failed"     // a saga step failed; rolled back
	CodeUnavailable    = "unavailable"      // store unreachable, deadline passed, too many connections
	CodeTooManyWatches = "too_many_watches" // a client holds ServerConfig.MaxWatchesPerClient watches
	CodeRateLimited    = "rate_limited"     // a client over its request rate or requests in progress (RequestLimits)
	CodeInternal       = "internal"
	CodeMethod         = "method_not_allowed"
)

// APIError is the body of every error response:
//
//	{"error": {"code": "insufficient_gpus", "message": "..."}}
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

func badRequest(msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: msg}
}

// apiErrorOf maps an error to its status and stable code.
func apiErrorOf(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var se *StepError
	if errors.As(err, &se) {
		// An agent's failure (its timeout included) is the agent's.
		return &APIError{Status: http.StatusBadGateway, Code: CodeAgentFailed, Message: err.Error()}
	}
	table := []struct {
		target error
		status int
		code   string
	}{
		{pool.ErrInvalid, http.StatusBadRequest, CodeInvalid},
		{pool.ErrNotFound, http.StatusNotFound, CodeNotFound},
		{pool.ErrExists, http.StatusConflict, CodeExists},
		{pool.ErrInsufficient, http.StatusConflict, CodeInsufficient},
		{pool.ErrNoHostPorts, http.StatusConflict, CodeNoHostPorts},
		{pool.ErrNoPairIDs, http.StatusConflict, CodeInsufficient},
		{pool.ErrInUse, http.StatusConflict, CodeInUse},
		{pool.ErrConflict, http.StatusConflict, CodeConflict},
		{ErrBusy, http.StatusConflict, CodeBusy},
		{errNotLeader, http.StatusServiceUnavailable, CodeNotLeader},
		{store.ErrNotLeader, http.StatusServiceUnavailable, CodeNotLeader},
		{context.DeadlineExceeded, http.StatusServiceUnavailable, CodeUnavailable},
	}
	for _, t := range table {
		if errors.Is(err, t.target) {
			// The code names the sentinel: "invalid_argument: invalid
			// argument: ..." said it twice.
			msg := strings.TrimPrefix(err.Error(), t.target.Error()+": ")
			return &APIError{Status: t.status, Code: t.code, Message: msg}
		}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}
