"""How many pytest-xdist workers the README's plain `pytest` runs on: a plugin that pytest
loads before any other, named in pyproject.toml's addopts (`-p tests.workers`).

Before any other, because a plugin may decide at start-up whether the run is spread over
workers: pytest-cov does, when pytest loads the initial conftests (before tests/conftest.py
is read), and measured one process while the workers ran (`pytest --cov=acp_bridge` ended in
an INTERNALERROR). So the number is set there, in the options read so far, and again once
the command line is parsed whole (`pytest_cmdline_main`), in the options the run uses.
Through `-p` in addopts rather than `-n` there, which would make `-p no:xdist` an error
about an unknown `-n`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Generator

import pytest

# Workers for the README's plain `pytest` on the 2-core machines CI and we run on: one more
# than the cores, since many tests wait (a browser drawing, a long poll, an agent's grace).
# Measured on one checkout, the whole suite (2,193 tests), each pair alternated: 69 s and 72 s
# with 3 workers against 81 s and 92 s with 2; 82 s and 73 s with 3 against 78 s and 95 s
# with 4 (this machine's speed varies by a third from run to run).
WORKERS = 3


def ask_for_workers(config: pytest.Config, option: argparse.Namespace) -> None:
    """Run on `WORKERS` pytest-xdist workers unless told otherwise: `-n N` picks the number,
    and `-n 0` or `-p no:xdist` runs in one process (for `--pdb`, `-s`, a debugger).

    `--dist loadgroup`: a test runs on whichever worker is free, but the tests of one of the
    `GROUPS` of tests/conftest.py run on one worker, so that what they share is made once,
    not once a worker. A worker asks for none: it is one (xdist sets `workerinput` on its
    config, and `PYTEST_XDIST_WORKER` in its environment before the config is made)."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput") \
            or "PYTEST_XDIST_WORKER" in os.environ or getattr(option, "usepdb", False):
        return  # `getattr`: with `-p no:debugging` there is no --pdb, so no `usepdb`
    if option.numprocesses is None:
        option.numprocesses = WORKERS
    if option.numprocesses and option.dist == "no":  # `-n N` groups too
        option.dist = "loadgroup"


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Generator[None, object, object]:
    """Before every other plugin's (a wrapper runs first): what pytest-cov reads."""
    ask_for_workers(early_config, early_config.known_args_namespace)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """What the run itself reads (the command line parsed whole, after the early hook),
    before xdist's own hook turns the number into workers: this plugin is loaded before
    xdist, so a `tryfirst` here would run after xdist's."""
    ask_for_workers(config, config.option)
    return (yield)
