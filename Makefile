# fleetnet — build, generate, lint, test.
#
# Tool versions are pinned here and in the go.mod files under hack/tools.
# Binaries built from Kubernetes and etcd carry their version in their file
# name, so `make tools` builds nothing that is already in bin/ at that version.

SHELL := /usr/bin/env bash -o pipefail
export GOTOOLCHAIN := local

KUBE_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.7.0
KWOK_VERSION ?= v0.8.0
HELM_VERSION ?= v3.22.0
GATEWAY_API_VERSION ?= v1.6.3
# CoreDNS of the process node's coredns image: the version of go.mod and of
# hack/tools/images/go.mod, where it is built.
COREDNS_VERSION ?= v1.15.0
# h2spec, the HTTP/2 conformance suite the edge's HTTP/2 server is tested
# against (the module proxy serves its v2 as +incompatible).
H2SPEC_VERSION ?= v2.2.1

BIN := $(CURDIR)/bin
comma := ,
space := $(subst ,, )
GO_BUILD_TOOL := go build -trimpath -ldflags='-s -w'

KUBE_BINS := kube-apiserver kube-controller-manager kube-scheduler kube-proxy
KUBE_TOOLS := $(foreach b,$(KUBE_BINS),$(BIN)/$(b)-$(KUBE_VERSION)) $(BIN)/etcd-$(ETCD_VERSION) \
	$(BIN)/kwok-$(KWOK_VERSION) $(BIN)/kwok-stages-$(KWOK_VERSION).yaml
# kwok's binary has no built-in stages; these are the "fast" ones its module
# ships, plus the node heartbeat that keeps the fake node Ready.
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
# kubectl, at the version of the API servers, for the demo; Gateway API's
# echo server, which its echo pods run; CoreDNS, each cluster's resolver.
DEMO_TOOLS := $(BIN)/kubectl-$(KUBE_VERSION) $(BIN)/echo-basic-$(GATEWAY_API_VERSION) $(BIN)/coredns-$(COREDNS_VERSION)
# Programs that stand in for well-known test images (agnhost, Gateway API's
# echo-basic, CoreDNS) when the local fleet's process node runs Pods as processes.
TEST_IMAGE_TOOLS := $(BIN)/agnhost-$(KUBE_VERSION) $(BIN)/echo-basic-$(GATEWAY_API_VERSION) $(BIN)/coredns-$(COREDNS_VERSION)
GEN_TOOLS := $(BIN)/controller-gen $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/staticcheck \
	$(BIN)/client-gen $(BIN)/lister-gen $(BIN)/informer-gen $(BIN)/applyconfiguration-gen $(BIN)/openapi-gen $(BIN)/crd-ref-docs

# Tests run packages in parallel; each fleet test starts its own API servers.
# -count=1: the end-to-end suites build fleetnet's binaries in a
# subprocess, which Go's test cache cannot see, so a cached pass could be
# stale.
TEST_FLAGS ?= -count=1 -p 2 -timeout 30m

.PHONY: all
all: build

##@ Build

.PHONY: deps
deps: ## Install the Debian packages the README's commands need, only what is missing (hack/install-deps.sh; root).
	hack/install-deps.sh

.PHONY: build
build: ## Build every fleetnet binary into bin/.
	go build -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: $(KUBE_TOOLS) $(TEST_IMAGE_TOOLS) $(GEN_TOOLS) $(BIN)/helm-$(HELM_VERSION) $(BIN)/h2spec-$(H2SPEC_VERSION) ## Build the pinned test and generator tools into bin/ (skips what is there).

$(BIN)/kube-%-$(KUBE_VERSION):
	cd hack/tools/kube && $(GO_BUILD_TOOL) -o $@.tmp k8s.io/kubernetes/cmd/kube-$*
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/kube-$*

$(BIN)/kubectl-$(KUBE_VERSION):
	cd hack/tools/kube && $(GO_BUILD_TOOL) -o $@.tmp k8s.io/kubernetes/cmd/kubectl
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/kubectl

$(BIN)/etcd-$(ETCD_VERSION):
	cd hack/tools/kube && $(GO_BUILD_TOOL) -o $@.tmp go.etcd.io/etcd/server/v3
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/etcd

$(BIN)/agnhost-$(KUBE_VERSION):
	cd hack/tools/kube && $(GO_BUILD_TOOL) -o $@.tmp k8s.io/kubernetes/test/images/agnhost
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/agnhost

# Rebuilt when its plugin list or module changes.
$(BIN)/coredns-$(COREDNS_VERSION): hack/tools/images/coredns/main.go hack/tools/images/go.mod
	cd hack/tools/images && $(GO_BUILD_TOOL) -o $@.tmp ./coredns
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/coredns

$(BIN)/echo-basic-$(GATEWAY_API_VERSION):
	cd hack/tools/images && $(GO_BUILD_TOOL) -o $@.tmp sigs.k8s.io/gateway-api/conformance/echo-basic
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/echo-basic

$(BIN)/helm-$(HELM_VERSION):
	cd hack/tools/helm && $(GO_BUILD_TOOL) -o $@.tmp helm.sh/helm/v3/cmd/helm
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/helm

$(BIN)/h2spec-$(H2SPEC_VERSION):
	cd hack/tools/h2spec && $(GO_BUILD_TOOL) -o $@.tmp github.com/summerwind/h2spec/cmd/h2spec
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/h2spec

$(BIN)/kwok-$(KWOK_VERSION):
	cd hack/tools/kwok && $(GO_BUILD_TOOL) -o $@.tmp sigs.k8s.io/kwok/cmd/kwok
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/kwok

$(BIN)/kwok-stages-$(KWOK_VERSION).yaml:
	dir=$$(cd hack/tools/kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
	for f in $(KWOK_STAGES); do echo '---'; cat $$dir/kustomize/stage/$$f; done > $@.tmp
	mv $@.tmp $@ && ln -sf $(notdir $@) $(BIN)/kwok-stages.yaml

$(BIN)/controller-gen: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen
$(BIN)/protoc-gen-go: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ google.golang.org/protobuf/cmd/protoc-gen-go
$(BIN)/protoc-gen-go-grpc: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ google.golang.org/grpc/cmd/protoc-gen-go-grpc
$(BIN)/client-gen $(BIN)/lister-gen $(BIN)/informer-gen $(BIN)/applyconfiguration-gen: $(BIN)/%: hack/tools/codegen/go.mod
	cd hack/tools/codegen && go build -o $@ k8s.io/code-generator/cmd/$*
$(BIN)/openapi-gen: hack/tools/codegen/go.mod
	cd hack/tools/codegen && go build -o $@ k8s.io/kube-openapi/cmd/openapi-gen
$(BIN)/staticcheck: hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ honnef.co/go/tools/cmd/staticcheck
$(BIN)/crd-ref-docs: hack/tools/docs/go.mod
	cd hack/tools/docs && go build -o $@ github.com/elastic/crd-ref-docs

##@ Images

# Every binary under cmd/ but the CLI runs in a cluster and gets an image.
IMAGE_BINARIES := $(filter-out fleetnetctl,$(notdir $(patsubst %/main.go,%,$(wildcard cmd/*/main.go))))
IMAGE_PLATFORMS := linux/amd64 linux/arm64
# RELEASE is the version this tree builds (internal/version.Release);
# builds other than `make release` are RELEASE-dev and say so.
RELEASE := $(shell sed -n 's/^const Release = "\(.*\)"$$/\1/p' internal/version/version.go)
VERSION ?= $(RELEASE)-dev
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# Images carry the commit's time, not the build's: same inputs, same digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Binaries say exactly which version and commit they are (--version,
# fleetnet_build_info) and carry no build id or path: same commit, same bytes.
VERSION_LDFLAGS = -s -w -buildid= -X github.com/fleetnet/fleetnet/internal/version.stamped=$(VERSION) \
	-X github.com/fleetnet/fleetnet/internal/version.stampedRevision=$(REVISION)

# cross-build builds every binary under cmd/ for each platform into
# _output/bin/OS_ARCH/.
.PHONY: cross-build
cross-build:
	for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -buildvcs=false -ldflags='$(VERSION_LDFLAGS)' \
			-o _output/bin/$${p%/*}_$${p#*/}/ ./cmd/... || exit 1; \
	done

.PHONY: images
images: deps cross-build ## Build an OCI image layout per binary for linux/amd64 and linux/arm64 into _output/images (no container engine); tagged VERSION (default RELEASE-dev).
	go run ./hack/build-images --bin-dir _output/bin --out _output/images --platforms $(subst $(space),$(comma),$(IMAGE_PLATFORMS)) \
		--version $(VERSION) --revision $(REVISION) --created $(SOURCE_DATE_EPOCH) $(IMAGE_BINARIES)

##@ Release

RELEASE_DIR := _output/release
CHARTS := $(notdir $(wildcard charts/fleetnet-*))

.PHONY: release
release: ## Build the release of internal/version.Release into _output/release: binaries (linux/amd64, arm64), images, charts, SHA256SUMS, release notes from CHANGELOG.md; two runs give the same checksums.
	@grep -q '^## $(RELEASE)\b' CHANGELOG.md || { echo "CHANGELOG.md has no '## $(RELEASE)' section: write it first"; exit 1; }
	@if [ -n "$$(git status --porcelain)" ]; then echo "the tree has uncommitted changes: a release is built from a commit"; exit 1; fi
	rm -rf $(RELEASE_DIR) _output/bin _output/images
	$(MAKE) images VERSION=$(RELEASE)
	mkdir -p $(RELEASE_DIR)/bin $(RELEASE_DIR)/images $(RELEASE_DIR)/charts
	for p in $(IMAGE_PLATFORMS); do \
		for b in _output/bin/$${p%/*}_$${p#*/}/*; do cp $$b $(RELEASE_DIR)/bin/$$(basename $$b)-$${p%/*}-$${p#*/}; done; \
	done
	for i in $(IMAGE_BINARIES); do tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner \
		-C _output/images -cf - $$i | gzip -n > $(RELEASE_DIR)/images/$$i-$(RELEASE).oci.tar.gz; done
	for c in $(CHARTS); do $(BIN)/helm package charts/$$c --version $(RELEASE:v%=%) --app-version $(RELEASE) -d $(RELEASE_DIR)/charts >/dev/null || exit 1; done
	go run ./hack/release-notes --changelog CHANGELOG.md --version $(RELEASE) --normalize-charts $(RELEASE_DIR)/charts \
		--created $(SOURCE_DATE_EPOCH) > $(RELEASE_DIR)/RELEASE-NOTES.md
	cd $(RELEASE_DIR) && find bin images charts RELEASE-NOTES.md -type f | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@echo "release $(RELEASE) ($(REVISION)) in $(RELEASE_DIR):" && cat $(RELEASE_DIR)/SHA256SUMS

##@ Run

.PHONY: demo
# deps first, then the rest: nothing is built on a machine that cannot run it.
demo: deps ## Bring up a local fleet of three clusters and show fleetnet working (needs root).
	$(MAKE) --no-print-directory $(KUBE_TOOLS) $(DEMO_TOOLS) build
	hack/demo.sh

.PHONY: conformance
conformance: deps ## Run the Gateway API conformance suite (GATEWAY-HTTP) on a local fleet it brings up and removes (needs root); the report goes to docs/conformance/.
	$(MAKE) --no-print-directory $(KUBE_TOOLS) $(TEST_IMAGE_TOOLS) build
	hack/conformance.sh

.PHONY: conformance-mcs
conformance-mcs: deps ## Run the mcs-api conformance suite's specs, encoded as end-to-end tests on pods, on the three-cluster fleet of test/e2e (needs root).
	$(MAKE) --no-print-directory tools build
	go test -count=1 -tags mcsconformance -run '^TestMCSConformance' -v -timeout 40m ./test/e2e

.PHONY: test-eastwest
test-eastwest: deps ## East-west gateways end to end: test/e2e's fleet with west on a network of its own whose pod range is east's (needs root; about 4 minutes).
	$(MAKE) --no-print-directory tools build
	go test -count=1 -tags networks -run '^TestEastWestOverlappingNetworks$$' -v -timeout 20m ./test/e2e

.PHONY: test-upgrade
test-upgrade: deps ## An HA local fleet started on the previous release (hack/previous-release, built from git), upgraded to this checkout component by component and rolled back, under traffic through the edge and the ClusterSetIP (needs root).
	$(MAKE) --no-print-directory tools build
	go test -count=1 -tags upgrade -run '^TestUpgradeAndRollBackUnderTraffic$$' -v -timeout 30m ./test/e2e

STRESS_RUNS ?= 20

.PHONY: stress-locality
stress-locality: deps ## Run TestClusterSetIPLocality STRESS_RUNS times (default 20), each on a fleet brought up right after the previous one was taken down; stops at the first failure, its log in _output/ (needs root; about 2 minutes a run; outside CI).
	$(MAKE) --no-print-directory tools build
	@mkdir -p _output; pass=0; for i in $$(seq 1 $(STRESS_RUNS)); do \
		log=_output/stress-locality-$$i.log; echo "==> run $$i of $(STRESS_RUNS) ($$log)"; \
		if ! go test -count=1 -run '^TestClusterSetIPLocality$$' -v -timeout 15m ./test/e2e >$$log 2>&1; then \
			tail -n 80 $$log; echo "stress-locality: run $$i failed after $$pass passed in a row"; exit 1; \
		fi; pass=$$((pass + 1)); grep -h 'scaled to 0' $$log | sed 's/^ */   /'; \
	done; echo "stress-locality: $$pass of $(STRESS_RUNS) runs passed in a row"

CHAOS_DURATION ?= 10m
CHAOS_SEED ?= 0

.PHONY: chaos
chaos: deps ## Faults at random for CHAOS_DURATION (default 10m; CHAOS_SEED repeats a run) on an HA local fleet under export churn and traffic through the edge, checking that nothing is lost (needs root; about 3 minutes more for set-up and the final check).
	$(MAKE) --no-print-directory tools build
	go test -count=1 -tags chaos -run '^TestChaos$$' -v -timeout 90m ./test/e2e -args -chaos.duration=$(CHAOS_DURATION) -chaos.seed=$(CHAOS_SEED)

.PHONY: demo-down
demo-down: ## Stop the demo's fleet and remove it.
	$(BIN)/fleetnetctl dev down

##@ Generate

.PHONY: generate
generate: deps $(GEN_TOOLS) ## Regenerate CRDs, deepcopy, clientset, listers, informers, apply configurations, OpenAPI, RBAC and protobuf code.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt \
		crd:crdVersions=v1 output:crd:artifacts:config=config/crd \
		paths=./api/about/...
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt \
		crd:crdVersions=v1 output:crd:artifacts:config=config/crd/networking \
		paths=./api/networking/...
	BIN=$(BIN) hack/update-codegen.sh
	$(BIN)/controller-gen rbac:roleName=fleetnet-agent paths=./internal/agent/... output:rbac:artifacts:config=config/rbac
	$(BIN)/controller-gen rbac:roleName=fleetnet-gateway paths=./internal/gateway/... output:rbac:artifacts:config=config/rbac/gateway
	$(BIN)/controller-gen rbac:roleName=fleetnet-dns paths=./internal/dns/... output:rbac:artifacts:config=config/rbac/dns
	$(BIN)/controller-gen rbac:roleName=fleetnet-discovery paths=./internal/discovery/... output:rbac:artifacts:config=config/rbac/discovery
	$(BIN)/controller-gen rbac:roleName=fleetnet-console paths=./internal/console/... output:rbac:artifacts:config=config/rbac/console
	go run ./hack/copy-mcs-crds config/crd
	hack/copy-gateway-crds.sh config/crd/gateway-api
	hack/copy-chart-files.sh
	hack/generate-proto.sh

.PHONY: docs
docs: deps build $(BIN)/crd-ref-docs ## Regenerate the references in docs/reference (API, keys, CLI; hack/docsgen) and the architecture picture docs/images/architecture.svg (Graphviz).
	go run ./hack/docsgen --out docs/reference --bin-dir $(BIN) --crd-ref-docs $(BIN)/crd-ref-docs
	dot -Tsvg -o docs/images/architecture.svg docs/images/architecture.dot

.PHONY: verify
verify: generate docs ## Fail when generated files (code, docs/reference, docs/images) differ from what is committed.
	@if [ -n "$$(git status --porcelain -- api config internal hack pkg charts)" ]; then \
		echo "generated files drifted; run 'make generate' and commit:"; \
		git status --porcelain -- api config internal hack pkg charts; git diff --stat; exit 1; \
	fi
	@if [ -n "$$(git status --porcelain -- docs/reference docs/images)" ]; then echo "generated docs drifted; run 'make docs' and commit:"; git status --porcelain -- docs/reference docs/images; git diff --stat -- docs/reference docs/images; exit 1; fi

##@ Check

# staticcheck skips pkg/generated: code-generator's informers use client-go
# fields that client-go has since deprecated, as Kubernetes' own do.
.PHONY: lint
lint: $(BIN)/staticcheck ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(BIN)/staticcheck $$(go list ./... | grep -v /pkg/generated/)
	# Modules of their own that `./...` does not reach: the conformance
	# suite's harness and the test images' CoreDNS build.
	cd test/conformance && go vet ./... && $(BIN)/staticcheck ./...
	cd hack/tools/images && go vet ./... && $(BIN)/staticcheck ./...

.PHONY: charts-verify
charts-verify: $(BIN)/helm-$(HELM_VERSION) ## helm lint --strict and helm template on every chart, with its defaults and each examples/*.yaml; wrong values must fail naming them.
	go test -count=1 -v -run '^(TestEveryChartIsTested|TestRender|TestWrongValues)$$' ./test/charts/

.PHONY: test
test: deps ## Install and build what the tests need, then run every test.
	$(MAKE) --no-print-directory tools
	go test $(TEST_FLAGS) ./...
	# Concurrency under the race detector (about two minutes): the edge's
	# fast path shares pooled connections between requests, the east-west
	# tunnel streams; the gateway's provider queue, Split and the Azure
	# providers' deploy lanes, the agent's publisher and importer.
	go test -race $(TEST_FLAGS) ./internal/edge/... ./internal/eastwest/... ./internal/httplimits/... \
		./internal/gateway/provider/... ./internal/agent/...

# Fuzz targets as package:function; `make test` runs their seed corpora.
FUZZ_TARGETS := ./internal/registry/merge:FuzzMergeInvariants ./internal/registry/validate:FuzzValidate \
	./internal/dns/fleetnet:FuzzServeDNS ./api/edge/v1:FuzzDecodeModel ./internal/edge/proxy:FuzzCompile ./internal/edge/l4:FuzzCompile \
	./internal/discovery/server:FuzzRequests ./internal/gateway/provider/azure/frontdoor/annotations:FuzzParse ./internal/edge/http1:FuzzParseRequest
FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s; e.g. make fuzz FUZZTIME=10m); a finding stops it, its input under the package's testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "==> $$fn in $$pkg for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

.PHONY: bench
bench: tools ## Run the benchmarks (the fleet benchmark takes about 2 minutes).
	go test -run '^$$' -bench . -benchmem -timeout 60m $$(go list ./... | grep -v /test/e2e)
	go test -run '^$$' -bench Fleet -benchtime 200x -timeout 30m ./test/e2e
	go test -run '^$$' -bench ProcessNodePods -benchtime 1x -timeout 30m ./test/e2e

.PHONY: bench-join
bench-join: tools ## A cluster joining a fleet of 5,000 exported Services x 3 clusters (FLEETNET_JOIN_SERVICES overrides): join time beside a plain client's at the same QPS, writes per import, peak heap, API server CPU; then 2,000 joined under API Priority and Fairness beside another client's requests (its p50/p99), without and with the chart's FlowSchema; then 4 namespaces x 1,000 Services imported with and without an import policy of one namespace (time, API writes, agent heap).
	go test -run '^$$' -bench 'Join|ImportPolicy' -benchtime 1x -timeout 90m ./test/agent

.PHONY: bench-edge
bench-edge: ## fleetnet-edge beside nginx: wrk, h2load and an open-loop generator, plain, TLS and h2, access logs off and on, CPU per request, medians of 3 rounds, about 5½ minutes (installs nginx-light, wrk, nghttp2-client); EDGEBENCH_FLAGS passes flags.
	hack/install-deps.sh bench
	go run ./test/edgebench $(EDGEBENCH_FLAGS)

.PHONY: bench-dns
bench-dns: tools ## fleetnet-dns beside CoreDNS's kubernetes plugin, 1,000 imports/Services, UDP on loopback; DNSBENCH_FLAGS passes flags.
	go run ./test/dnsbench $(DNSBENCH_FLAGS)

.PHONY: bench-l4
bench-l4: ## fleetnet-edge's L4 proxy beside haproxy in TCP mode: MB/s, connections/s, UDP datagrams/s (installs haproxy); L4BENCH_FLAGS passes flags.
	hack/install-deps.sh bench
	go run ./test/l4bench $(L4BENCH_FLAGS)

.PHONY: bench-eastwest
bench-eastwest: ## East-west gateways: a connection through fleetnet's pair (edge L4 proxy → HTTP/2 CONNECT over mutual TLS 1.3 → peer gateway) beside a pair of haproxy frontends over TLS 1.3 and the direct path; MB/s and connections/s, medians of 3 rounds (installs haproxy); L4BENCH_FLAGS passes flags.
	hack/install-deps.sh bench
	go run ./test/l4bench -eastwest $(L4BENCH_FLAGS)

.PHONY: bench-scale
bench-scale: tools ## The registry at fleet scale on a 3-member etcd with two replicas (100 clusters, 300,000 endpoints, 100 watchers): one table; FLEETNET_SCALE=0.1 runs a tenth; SCALEBENCH_FLAGS passes flags.
	go run ./test/scale/bench $(SCALEBENCH_FLAGS)

.PHONY: e2e-setup e2e-tests e2e-cleanup
e2e-setup: ## Live Azure Front Door check, step 1 (AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, ENABLE_AZURE_FRONT_DOOR=true; docs/azure-front-door.md).
	go run ./hack/azure-e2e setup
e2e-tests: ## Live Azure Front Door check, step 2: Programmed, tags, WAF attached and blocking, probe path, Private Link approved, traffic from the backend.
	go run ./hack/azure-e2e tests
e2e-cleanup: ## Live Azure Front Door check, step 3: bounded withdrawal, traffic blocked for E2E_BLOCKED_FOR, delete what e2e-setup created.
	go run ./hack/azure-e2e cleanup

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
