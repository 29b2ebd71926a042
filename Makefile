# Two commands do all the set-up on a fresh machine:
#   make demo   - install what is missing, then run the whole pipeline on embedded services
#   make test   - install what is missing, then run the test suite
# Both are idempotent: a second run re-installs nothing unless pyproject.toml changed.

PYTHON ?= python3
VENV   ?= .venv
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
# CI and `make test` run everything but the `slow` tests (`-m slow`); `make test-all` runs those too.
PYTEST_ARGS ?= -m "not slow"

.PHONY: setup demo test test-all lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	@PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup.sh
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: setup
	$(VENV)/bin/streamer demo

test: setup
	$(VENV)/bin/ruff check streamer tests bench
	$(VENV)/bin/mypy
	PYSPARK_PYTHON=$(abspath $(VENV))/bin/python $(VENV)/bin/pytest $(PYTEST_ARGS)

test-all: setup
	$(MAKE) test PYTEST_ARGS=

lint: setup
	$(VENV)/bin/ruff check streamer tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
