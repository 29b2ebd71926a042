"""Fixtures of the archive's integration tests: the target tests' own (a unique database ``prefix``, an
agent-backed ``source``, a ``target_stack`` on the session's metastore), from
tests/integration/target/conftest.py rather than written again."""

from __future__ import annotations

from tests.integration.target.conftest import prefix, source, target_stack

__all__ = ["prefix", "source", "target_stack"]
