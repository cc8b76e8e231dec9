# Wharf build targets. `make run` and `make test` are the two set-up commands
# a new machine needs; everything else is for development.
GO        ?= go
BIN       := bin/wharf
PKGS      := ./...
FUZZTIME  ?= 15s

.PHONY: build test test-deps run bench sim fuzz vet clean bench-compare jepsen bench-failover test-compat test-bench test-race

build:
	$(GO) build -o $(BIN) ./cmd/wharf

# The CI gate: vet, then every test with the race detector off for speed on
# 2 cores, with a short, meaningful slice of crash loops and simulator seeds;
# then the packages whose types are shared across goroutines again under the
# race detector (test-race).
# WHARF_REQUIRE_BROWSER=1: the dashboard's browser test fails, rather than
# skips, without chromium. Then the compat module: RocketMQ's own Go client
# against the wharf binary (its own go.mod, so the broker's module does not
# depend on it; the first run fetches it through the module proxy).
test: test-deps vet build
	WHARF_REQUIRE_BROWSER=1 $(GO) test -count=1 -timeout 20m $(PKGS)
	$(MAKE) test-compat
	$(MAKE) test-bench
	$(MAKE) test-race

# What the tests need beyond Go: Debian's chromium for the dashboard's
# browser test (installed with apt-get when missing and root; fails clearly
# otherwise).
test-deps:
	./scripts/test-setup.sh

# A development cluster on loopback: a name server on 9876 and two broker
# groups (master + slave each, the first master on 10911), data in ./data;
# Ctrl-C stops it.
run: build
	./$(BIN) dev --data ./data

# Benchmarks; figures and the commands that produced them are in docs/BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench 'Append' -benchtime 4000x ./storage/
	$(GO) test -run '^$$' -bench 'ReadQueue|RecoverAbnormal' -benchtime 3x -timeout 30m ./storage/
	$(GO) test -run '^$$' -bench . -benchmem ./storage/cq/ ./storage/index/ ./protocol/

# Wharf side by side with NATS JetStream (the bench/ module, its own go.mod):
# writes its section of docs/BENCHMARKS.md and an HTML report with charts under
# bench/out/ (git-ignored; its path is the last line). QUICK=1 for a run under
# 5 minutes; BENCHFLAGS for more (cd bench && go run . -h).
# It builds its own copy of the binary so that a concurrent `make build` cannot
# swap bin/wharf under a run.
bench-compare:
	$(GO) build -o bin/wharf-bench ./cmd/wharf
	cd bench && $(GO) run . --wharf-bin ../bin/wharf-bench $(if $(QUICK),--quick) $(BENCHFLAGS)

# A long campaign of the simulator: seeds 1..SEEDS, each with its own topology
# and configuration, every scenario in turn (seed mod the number of
# scenarios); prints failures with their seed and configuration, and the
# seeds per minute. SEEDS=100000 make sim for a longer one.
SEEDS ?= 10000
sim: build
	./$(BIN) sim --seeds $(SEEDS)

# The Jepsen-style tests (real processes, faults through a TCP proxy, a
# history checked for lost, duplicated and reordered messages): classic
# master/slave in cmd/wharf/jepsen_test.go, controller mode (automatic
# failover, one master per epoch) in cmd/wharf/jepsen_ctl_test.go, with
# more rounds per fault than `make test` runs (3 classic, 2 controller).
# ROUNDS=50 make jepsen for a longer campaign.
ROUNDS ?= 20
jepsen:
	$(GO) test -count=1 -timeout 60m -run '^TestJepsen' -v ./cmd/wharf/ -jepsen.rounds=$(ROUNDS)

# Controller mode's figures in docs/BENCHMARKS.md ("Failover in controller
# mode"): kill -9 of the master to the first SEND_OK on the new one over 20
# rounds, then a SYNC group's throughput under controller mode vs classic
# SYNC_MASTER, alternating.
bench-failover:
	$(GO) test -count=1 -timeout 30m -run '^TestJepsenCtlKillMaster$$' -v ./cmd/wharf/ -jepsen.rounds=20 | grep -E 'first SEND_OK|failover|^(ok|FAIL|---)'
	$(GO) test -count=1 -timeout 30m -run '^TestJepsenCtlThroughput$$' -v ./cmd/wharf/ -jepsen.bench -jepsen.benchrounds=6 -jepsen.benchtime=3s | grep -E 'msgs/s|ratio|^(ok|FAIL|---)'

# Short fuzz runs of every fuzz target (go test -fuzz takes one target at a time).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# RocketMQ's own Go client against the wharf binary (compat/, a module of
# its own: Wharf's module does not depend on the client). The first run
# downloads the client's module.
test-compat:
	cd compat && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# The bench-compare module's own tests (its report's verdicts), also its own
# go.mod.
test-bench:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

# The race detector over the packages where goroutines meet: the client, the
# storage files synced off their owner (a ConsumeQueue flush racing the store's
# close was found this way), netio's loops, the actors' cores and shells, the
# wire codecs. About 3 minutes on 2 cores; the simulator and the end-to-end
# tests stay out (single-threaded by design, or too slow instrumented).
RACE_PKGS := ./client/... ./storage/... ./netio/... ./actors/... ./protocol/... ./rebalance/...
test-race:
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

vet:
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
