# dubstudio — the two commands a new user needs are `make run` and `make test`.
GO ?= go
TEMPL = $(GO) tool templ
# The model hosts' tests run on an interpreter with PyTorch where one is installed
# (Debian's python3-torch: the batching host's CPU tests), else they skip those tests.
HOST_TEST_PYTHON ?= $(shell /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 && echo /usr/bin/python3 || echo python3)

.PHONY: run test build generate check vendor bench fuzz e2e clean

run: ## start the app with a local Postgres, migrations, the CPU engine and a demo project
	./scripts/run.sh

build: generate
	$(GO) build -o bin/dubstudio ./cmd/dubstudio

generate:
	$(TEMPL) generate

# test runs the whole suite against the real Postgres (TEST_DATABASE_URL, default
# postgres://root@127.0.0.1:5432/test), real ffmpeg/espeak-ng and headless Chromium.
test: check
	$(GO) test -count=1 -timeout 15m ./...
	$(HOST_TEST_PYTHON) -m unittest discover -s tts/hosts -p 'test_*.py'
	./scripts/fuzz.sh 30000x # every fuzz target, 30,000 inputs each: under a minute in all

# check fails when code is unformatted, vet or golangci-lint complains (depguard holds the
# layering of docs/architecture.md), go.mod is not tidy or generated views are stale.
# golangci-lint is pinned in tools/go.mod, apart from the app's own dependencies.
LINT = $(GO) tool -modfile=tools/go.mod golangci-lint

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(LINT) run ./...
	$(TEMPL) generate >/dev/null
	@git diff --exit-code --stat -- 'views/*_templ.go' || { echo 'templ generate changed files: commit them'; exit 1; }

vendor: ## refresh static/vendor from the pinned npm packages
	npm ci --no-audit --no-fund
	./static/vendor.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...

fuzz: ## each parser's fuzz target for a short time
	./scripts/fuzz.sh 300000x

clean:
	rm -rf bin
