package main

import (
	"encoding/json"
	"io"
	"log/slog"

	"github.com/dxpu/dxpu/internal/app/units"
)

// env is all a command may touch of the process: its standard streams,
// its arguments and environment, and the logger (on stderr, at the level
// --verbose sets). Commands get it from their constructor, so tests run
// them with their own env, side by side.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string
	getenv         func(string) string
	level          *slog.LevelVar
	log            *slog.Logger
}

// newEnv returns an env over the given streams, logging at Info level,
// durations spelled as everywhere else (5us, not slog's 5µs).
func newEnv(stdin io.Reader, stdout, stderr io.Writer, args []string, getenv func(string) string) *env {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, args: args, getenv: getenv, level: new(slog.LevelVar)}
	e.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: e.level, ReplaceAttr: units.ReplaceAttr}))
	return e
}

// getenvOr returns the environment variable k, or def when it is unset or
// empty.
func (e *env) getenvOr(k, def string) string {
	if v := e.getenv(k); v != "" {
		return v
	}
	return def
}

// printJSON writes v, a command's one result object, indented by two
// spaces as every such --json result is (dxpu help units); a stream of
// objects is written one a line (JSON lines) by its command instead.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
