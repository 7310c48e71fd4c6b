// Package ctl is the manager's command-line client behind `dxpu ctl`: it
// calls the manager's API through fabric/ctlclient and prints the answers
// as tables for people or, with Options.JSON, as the API's JSON (indented)
// for programs. It reads box and host registrations from JSON files,
// refusing unknown fields with the list of the valid ones, and keeps the
// agent credential the manager issues in a new 0600 file.
//
// Errors carry their exit status through internal/app/apperr: a call the
// manager refused (a ctlclient.APIError) is apperr.ErrFailed, unless it
// answered 400 (a parameter or file it cannot take, the user's to fix);
// that and everything else (bad options, unreadable files, an unreachable
// manager) is apperr.ErrUsage.
package ctl
