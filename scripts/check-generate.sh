#!/usr/bin/env bash
# Regenerates everything `go generate` produces and fails if a committed file
# changed or an untracked one appeared: generated code must be reproducible.
set -euo pipefail
cd "$(dirname "$0")/.."
go generate ./...
if ! git diff --quiet -- . || [ -n "$(git ls-files --others --exclude-standard)" ]; then
	echo "check-generate: go generate changed the tree:" >&2
	git status --short >&2
	git diff --stat >&2
	exit 1
fi
echo "check-generate: generated files are reproducible"
