# The two commands of the README: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APT_PACKAGES := prometheus prometheus-pushgateway postgresql chromium chromium-driver

.PHONY: demo test test-real real-cluster e2e venv system-deps bench lint clean

venv: $(VENV)/.installed

# uv installs the same packages in seconds where pip takes minutes; pip if uv cannot be had.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	( $(BIN)/python -m pip install --quiet uv && $(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[test,dev]" ) \
	  || ( $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e ".[test,dev]" )
	touch $@

# Debian packages for the real services the embedded cluster and the tests run (chromium: the HTML report test;
# chromium-driver: the e2e drives the Prefect UI with Selenium).
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v prometheus-pushgateway >/dev/null 2>&1 || missing="$$missing prometheus-pushgateway"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	  else \
	    echo "missing Debian packages:$$missing — run: sudo apt-get install $(APT_PACKAGES)" >&2; exit 1; \
	  fi; \
	fi

demo: venv system-deps
	$(BIN)/gpuaas demo

# Two test processes: most of the suite waits on servers and clocks, so two overlap those waits on two cores.
TEST_WORKERS ?= 2

test: venv system-deps lint real-cluster
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=20

# The real control plane (kube-apiserver, etcd, the Kueue manager) built from the Go module proxy into
# ~/.cache/gpuaas/k8s/ once per machine; seconds when cached. See docs/real-cluster.md.
real-cluster: venv
	$(BIN)/python -c "from gpuaas.cluster.real._build import main; raise SystemExit(main())"

# The conformance and differential suites alone, against the real control plane (also part of `make test`).
test-real: venv system-deps real-cluster
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/python -m pytest tests/real -m real -q

# A real Prefect server, work pool, `prefect deploy --all` and worker against the embedded cluster
# (also part of `make test`, which runs the whole suite).
e2e: venv system-deps
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/python -m pytest tests/e2e -q

# Every benchmark, one after the other, then one summary; exits 1 if any failed (after running the rest).
# BENCH=cycle (or BENCH="cycle store"): only those; SMOKE=1: each at its smallest size (seconds). docs/benchmarks.md
bench: venv system-deps
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/python -m bench $(BENCH) $(if $(SMOKE),--smoke)

lint: venv
	$(BIN)/ruff check gpuaas flows tasks reports tests bench
	$(BIN)/mypy gpuaas flows tasks reports bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
