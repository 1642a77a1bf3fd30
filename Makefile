# Kairo — the two commands of the quick start are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 10s

.PHONY: run build test lint fuzz bench clean

# Start Kairo in the foreground on its embedded defaults (data in ./.kairo).
run: build
	./bin/kairo up

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/kairo ./cmd/kairo

# Everything CI runs: format and vet checks, the whole suite under the race
# detector, and a short run of every fuzz target.
test: lint
	$(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) fuzz

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) build ./abi/...

# Each fuzz target for FUZZTIME; inputs that fail are written to the
# package's testdata/fuzz and replayed by every later `go test`.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFrameDecode$$' -fuzztime $(FUZZTIME) ./kernel/ipc/
	$(GO) test -run '^$$' -fuzz '^FuzzEventDecode$$' -fuzztime $(FUZZTIME) ./abi/
	$(GO) test -run '^$$' -fuzz '^FuzzSubject$$' -fuzztime $(FUZZTIME) ./kernel/bus/

# The speed figures of the kernel (events/s, p50-us).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./kernel/bench/

clean:
	rm -rf bin
