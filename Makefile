# One command to set up and run the demo, one to set up and run the tests.
VENV   := .venv
PY     := $(VENV)/bin/python
CTL    := $(abspath $(VENV))/bin/gleambrctl
STAMP  := $(VENV)/.installed-stamp
EXAMPLE := examples/bookshelf

.PHONY: install browser demo test lint format bench docs clean

$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Debian's chromium for the web page's tests (tests/web); Playwright drives it and never
# downloads a browser of its own. Installs only when it is missing (needs root and apt).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

demo: install
	$(CTL) index $(EXAMPLE)
	cd $(EXAMPLE) && $(CTL) search "check that an ISBN is valid" -k 5
	cd $(EXAMPLE) && $(CTL) search "route an HTTP request to its handler" -k 5

# Two workers, one module each at a time (module fixtures, such as a daemon, start once).
test: install browser
	$(VENV)/bin/pytest -q -n 2 --dist loadscope

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	$(PY) bench/index_throughput.py
	$(PY) bench/query_latency.py

# docs/cli.md is generated from --help; tests/test_docs.py fails when it is out of date.
docs: install
	$(PY) docs/generate_cli.py

clean:
	rm -rf $(VENV) $(EXAMPLE)/.gbr bench/out
