package manager

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// role is what a bearer token lets its holder do.
type role int

const (
	roleNone  role = iota // no token, or one the manager does not know
	roleRead              // Config.ReadToken: GET calls
	roleAdmin             // Config.Token: every call
)

// checkTokens refuses a configuration whose roles cannot be told apart.
func checkTokens(cfg Config) error {
	switch {
	case cfg.Token == "" && cfg.ReadToken != "":
		return errors.New("manager: a read-only token without an admin token; set Config.Token too (an empty admin token turns authentication off)")
	case cfg.Token != "" && cfg.Token == cfg.ReadToken:
		return errors.New("manager: the read-only token equals the admin token; give each role its own token")
	}
	return nil
}

// roleOf returns the role of the request's bearer token. Without an admin
// token configured every caller is admin (the in-process demo).
func (m *Manager) roleOf(r *http.Request) role {
	if m.cfg.Token == "" {
		return roleAdmin
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return roleNone
	}
	tok = strings.TrimSpace(tok)
	// Compare with both so that timing tells nothing about which matched.
	admin := subtle.ConstantTimeCompare([]byte(tok), []byte(m.cfg.Token))
	read := 0
	if m.cfg.ReadToken != "" {
		read = subtle.ConstantTimeCompare([]byte(tok), []byte(m.cfg.ReadToken))
	}
	switch {
	case admin == 1:
		return roleAdmin
	case read == 1:
		return roleRead
	}
	return roleNone
}

// authorize refuses a request its token does not allow: reads need the
// read-only or the admin token, everything else the admin token.
func (m *Manager) authorize(r *http.Request) *APIError {
	got := m.roleOf(r)
	need := roleRead
	if mutating(r.Method) {
		need = roleAdmin
	}
	switch {
	case got >= need:
		return nil
	case got == roleNone:
		what := "this call reads the pool"
		if need == roleAdmin {
			what = "this call changes state"
		}
		return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: what + " and needs a valid bearer token (Authorization: Bearer ...)"}
	default:
		return &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: "the read-only token may only read (GET); " + r.Method + " " + r.URL.Path + " needs the admin token"}
	}
}

func mutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}
