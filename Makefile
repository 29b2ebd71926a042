# Two commands do all the set-up on a fresh machine:
#   make demo   - install what is missing (the runtime only), then run the whole pipeline on embedded services
#   make test   - install what is missing (the runtime and the test tooling), then run the test suite
# Both are idempotent: a second run re-installs nothing unless pyproject.toml or scripts/setup.sh changed,
# and `make demo` after `make test` installs nothing (the test set-up holds the runtime).

PYTHON ?= python3
VENV   ?= .venv
HASH   := $(shell cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)
RUNTIME_STAMP := $(VENV)/.installed-$(HASH)-runtime
DEV_STAMP     := $(VENV)/.installed-$(HASH)-dev
# CI and `make test` run everything but the `slow` tests (`-m slow`); `make test-all` runs those too.
PYTEST_ARGS ?= -m "not slow"

.PHONY: setup setup-dev demo test test-all lint clean

setup: $(RUNTIME_STAMP)

setup-dev: $(DEV_STAMP)

$(RUNTIME_STAMP): pyproject.toml scripts/setup.sh
	@if [ -f $(DEV_STAMP) ]; then touch $@; else \
	  PYTHON=$(PYTHON) VENV=$(VENV) EXTRAS=runtime bash scripts/setup.sh && \
	  rm -f $(VENV)/.installed-* && touch $@; fi

$(DEV_STAMP): pyproject.toml scripts/setup.sh
	@PYTHON=$(PYTHON) VENV=$(VENV) EXTRAS=dev bash scripts/setup.sh
	@rm -f $(VENV)/.installed-* && touch $(DEV_STAMP) $(RUNTIME_STAMP)

demo: setup
	$(VENV)/bin/streamer demo

test: setup-dev
	$(VENV)/bin/ruff check streamer tests bench
	$(VENV)/bin/mypy
	PYSPARK_PYTHON=$(abspath $(VENV))/bin/python $(VENV)/bin/pytest --durations=30 $(PYTEST_ARGS)

test-all: setup-dev
	$(MAKE) test PYTEST_ARGS=

lint: setup-dev
	$(VENV)/bin/ruff check streamer tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
