# dxpu: everything a fresh machine needs is in these targets.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 15s
BENCHTIME ?= 1s

BINDIR    ?= bin
MANDIR    ?= $(BINDIR)/man

.PHONY: all build install man libdxpubridge c-examples cross-build demo test stress bench generate check-generate lint fuzz ci clean

all: build

## build: bin/dxpu and bin/dxpu-guest (the tool `dxpu vm` puts in its guests), static (no cgo).
build:
	CGO_ENABLED=0 $(GO) build -o $(BINDIR)/dxpu ./cmd/dxpu
	CGO_ENABLED=0 $(GO) build -o $(BINDIR)/dxpu-guest ./cmd/dxpu-guest

## install: dxpu and dxpu-guest into $$(go env GOBIN), or $$(go env GOPATH)/bin.
install:
	CGO_ENABLED=0 $(GO) install ./cmd/dxpu ./cmd/dxpu-guest

## man: man pages of every command into MANDIR (generated from --help).
man: build
	$(BINDIR)/dxpu man --dir $(MANDIR)

## libdxpubridge: the bridge core as a C library (bin/libdxpubridge.a and .so; header in cmd/libdxpubridge/include).
libdxpubridge:
	$(GO) build -buildmode=c-archive -o $(BINDIR)/libdxpubridge.a ./cmd/libdxpubridge
	$(GO) build -buildmode=c-shared -o $(BINDIR)/libdxpubridge.so ./cmd/libdxpubridge

## c-examples: the C library's examples, built as its test builds them (needs cc): bin/dxpu-c-pair, bin/dxpu-c-badinput.
c-examples: libdxpubridge
	$(CC) -std=c11 -Wall -Wextra -Werror -Icmd/libdxpubridge/include -I$(BINDIR) -O2 cmd/libdxpubridge/example/pair.c $(BINDIR)/libdxpubridge.a -lpthread -o $(BINDIR)/dxpu-c-pair
	$(CC) -std=c11 -Wall -Wextra -Werror -Icmd/libdxpubridge/include -I$(BINDIR) -O1 cmd/libdxpubridge/example/badinput.c -L$(BINDIR) -Wl,-rpath,$(abspath $(BINDIR)) -ldxpubridge -o $(BINDIR)/dxpu-c-badinput

## cross-build: arm64 builds of dxpu and the C library (needs gcc-aarch64-linux-gnu).
cross-build:
	scripts/cross-build.sh

## demo: the main job: a small emulated datacenter, native against fabric (no root).
demo:
	$(GO) run ./cmd/dxpu demo

## test: every package's tests (privileged ones skip unless DXPU_REQUIRE_PRIVILEGED=1).
test:
	$(GO) test -count=1 -timeout 20m $(PKGS)

## stress: the tests STRESS_COUNT times (default 3) with a busy loop per core beside them, then -race
## over the packages with goroutines (knobs: scripts/stress.sh).
stress:
	scripts/stress.sh

## bench: Go benchmarks with allocation figures.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

## generate: regenerate bpf2go output and testdata captures.
generate:
	$(GO) generate ./...

## check-generate: fail if `go generate` changes any committed file.
check-generate:
	scripts/check-generate.sh

## lint: gofmt and go vet.
lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet $(PKGS)

## fuzz: every fuzz target for FUZZTIME each.
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-all.sh

ci:
	bash .ci/run

clean:
	rm -rf bin
