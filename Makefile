# nanofleet — build, test and check every module of the go.work workspace.
# `go test ./...` does not cross modules from the workspace root, so each
# target walks the modules listed by `go list -m`.

SHELL := /bin/bash
MODULES := $(shell go list -m -f '{{.Dir}}')
SERVICES := nanofleet channel-gateway agent-worker tool-runner memory-consolidator
GOTEST_FLAGS ?= -count=1 -timeout 12m

.PHONY: all build test race vet fmt fmt-check proto proto-check run bench chaos compose-test clean

all: build

build:
	@mkdir -p bin
	@for s in $(SERVICES); do \
		echo "go build -o bin/$$s ./services/$$s"; \
		(cd services/$$s && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o ../../bin/$$s .) || exit 1; \
	done

# Every module's tests; fuzz targets run their seed corpora.
test:
	@fail=0; for m in $(MODULES); do \
		echo "== $$m"; \
		(cd $$m && go test $(GOTEST_FLAGS) ./...) || fail=1; \
	done; exit $$fail

# Every module's tests under the race detector (cgo: needs a C compiler).
race:
	@$(MAKE) --no-print-directory test GOTEST_FLAGS="-count=1 -race -timeout 20m"

vet:
	@for m in $(MODULES); do (cd $$m && go vet ./...) || exit 1; done

fmt:
	@gofmt -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The .proto files below proto/: the fleet's own, and a platform's
# frames a channel adapter speaks.
PROTOS = nanofleet/v1/*.proto feishu/pbbp2/*.proto

# Regenerate the protobuf Go code with Debian's protoc and the
# protoc-gen-go pinned as a tool in proto/go.mod.
proto:
	cd proto && go build -o ../bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	cd proto && protoc --plugin=protoc-gen-go=../bin/protoc-gen-go --go_out=. --go_opt=paths=source_relative $(PROTOS)

# Fails when a generated .pb.go differs from what make proto would write
# (a .proto changed without regenerating, or a generated file edited).
proto-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf '"$$tmp" EXIT && cd proto && \
	go build -o $$tmp/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go && \
	protoc --plugin=protoc-gen-go=$$tmp/protoc-gen-go --go_out=$$tmp --go_opt=paths=source_relative $(PROTOS) && \
	fail=0; for f in $$( (ls $(PROTOS:.proto=.pb.go); cd $$tmp && ls $(PROTOS:.proto=.pb.go)) | sort -u); do \
		cmp -s $$f $$tmp/$$f || { echo "proto/$$f is not what make proto writes: run make proto"; fail=1; }; \
	done; exit $$fail

# The all-in-one with an embedded NATS server.
run: build
	./bin/nanofleet run

# Load bench: figures, JSON and plot into docs/bench (well over 15 minutes on 2 cores:
# the memory suite alone idles 90 s before each of its ten RSS readings).
# One suite alone: cd services/nanofleet && go run ./cmd/bench --suites shipped --out DIR
bench:
	cd services/nanofleet && go run ./cmd/bench

# The long chaos test (a few minutes); `make test` runs a short one.
chaos:
	cd services/nanofleet && NANOFLEET_CHAOS=long go test -count=1 -run TestChaos -timeout 20m -v ./chaos/

# docker-compose.yml for real (root): starts dockerd if none runs, makes the
# base images and the compose plugin offline (deploy/offline), builds the
# images, runs the fleet through failures, then `compose down -v`.
compose-test:
	cd deploy && NANOFLEET_COMPOSE_TEST=1 go test -count=1 -run '^TestComposeUp$$' -timeout 45m -v .

clean:
	rm -rf bin
