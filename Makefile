PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FUZZ_STAMP := $(VENV)/.installed-fuzz
ETCD_STAMP := $(VENV)/.installed-etcd

.PHONY: run test lint fuzz bench clean

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/tollgate serve

lint: $(STAMP)
	$(BIN)/ruff check controller actors web storage tests $(wildcard bench)
	$(BIN)/mypy
	$(BIN)/lint-imports

# Debian's Chromium for the console's browser tests (tests/console/), launched by path (root or sudo).
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	$(SUDO) apt-get install -y chromium || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)

test: lint $(ETCD_STAMP) $(CHROMIUM)
	$(BIN)/pytest -n auto --maxprocesses=4

# etcd 3.4 (Debian's etcd-server; root or sudo) for tests/cluster/, which start their own members on free loopback
# ports. Where an init system runs, the package starts a system etcd on 2379 that the tests never use: it is stopped
# and disabled right after the install, so it takes no CPU from the suite.
ETCD_INSTALL = $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server

$(ETCD_STAMP): $(STAMP)
	@command -v etcd >/dev/null || { \
		{ $(ETCD_INSTALL) || { $(SUDO) apt-get update && $(ETCD_INSTALL); }; } && \
		if [ -d /run/systemd/system ]; then $(SUDO) systemctl disable --now etcd >/dev/null 2>&1 || true; \
		elif [ -x /etc/init.d/etcd ]; then $(SUDO) /etc/init.d/etcd stop >/dev/null 2>&1 || true; fi; }
	etcd --version | grep -q '^etcd Version: 3\.4\.'
	touch $(ETCD_STAMP)

$(FUZZ_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,fuzz]'
	touch $(FUZZ_STAMP)

# Schemathesis over every operation of our own OpenAPI documents, against a controller it starts (tests/fuzz/run.py;
# about 4 minutes on 2 cores). Logs and reports stay in the temporary directory it prints.
fuzz: $(FUZZ_STAMP)
	$(BIN)/python -m tests.fuzz.run

# wrk is the HTTP load generator of the http and sessions scenarios (Debian/Ubuntu package; root or sudo).

bench: $(STAMP)
	@command -v wrk >/dev/null || $(SUDO) apt-get install -y wrk || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y wrk)
	mkdir -p bench/results
	$(BIN)/python -m bench all --results bench/RESULTS.md --json bench/results/bench.json

clean:
	rm -rf $(VENV) data
