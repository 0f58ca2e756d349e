"""The suite's own start-up (tests/workers.py, tests/conftest.py): how many xdist workers it
asks for, and when, and how it hands them out."""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest, workers


class _Plugins:
    def __init__(self, xdist: bool) -> None:
        self.xdist = xdist

    def hasplugin(self, name: str) -> bool:
        return name == "xdist" and self.xdist


@pytest.fixture(autouse=True)
def _not_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests run in an xdist worker themselves: its environment says so."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


def _config(*, xdist: bool = True, **option: Any) -> Any:
    """A stand-in for pytest.Config: only the options the plugins that are loaded define."""
    namespace = argparse.Namespace(**option)
    return SimpleNamespace(pluginmanager=_Plugins(xdist), option=namespace,
                           getoption=lambda name, default=None: getattr(namespace, name, default))


@pytest.mark.parametrize(("option", "expected"), [
    pytest.param({"numprocesses": None, "dist": "no", "usepdb": False}, (workers.WORKERS, "loadgroup"), id="plain"),
    pytest.param({"numprocesses": 0, "dist": "no", "usepdb": False}, (0, "no"), id="-n0"),
    pytest.param({"numprocesses": 2, "dist": "no", "usepdb": False}, (2, "loadgroup"), id="-n2"),
    pytest.param({"numprocesses": "auto", "dist": "no", "usepdb": False}, ("auto", "loadgroup"), id="-nauto"),
    pytest.param({"numprocesses": 2, "dist": "load", "usepdb": False}, (2, "load"), id="-n2-dist-load"),
    pytest.param({"numprocesses": None, "dist": "no", "usepdb": True}, (None, "no"), id="--pdb"),
    pytest.param({"numprocesses": 0, "dist": "no"}, (0, "no"), id="-n0-p-no:debugging"),
    pytest.param({"numprocesses": None, "dist": "no"}, (workers.WORKERS, "loadgroup"), id="-p-no:debugging"),
])
def test_the_workers_the_suite_asks_for(option: dict[str, Any], expected: tuple[Any, str]) -> None:
    """`-p no:debugging` leaves no `--pdb` option (no `usepdb`): the suite still starts. The
    same in the options read before the conftests (what pytest-cov reads) as in the run's."""
    config = _config(**option)
    config.known_args_namespace = argparse.Namespace(**option)
    next(workers.pytest_cmdline_main(config))  # before xdist's own
    assert (config.option.numprocesses, config.option.dist) == expected
    early = workers.pytest_load_initial_conftests(config)
    next(early)  # before every other plugin's
    assert (config.known_args_namespace.numprocesses, config.known_args_namespace.dist) == expected


def test_without_xdist_or_in_a_worker_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(xdist=False, usepdb=False)
    next(workers.pytest_cmdline_main(config))
    assert vars(config.option) == {"usepdb": False}
    worker = _config(numprocesses=None, dist="no", usepdb=False)
    worker.workerinput = {}
    next(workers.pytest_cmdline_main(worker))
    assert (worker.option.numprocesses, worker.option.dist) == (None, "no")
    # Before its config is made, a worker is known by its environment only.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    early = _config(numprocesses=None, dist="no", usepdb=False)
    workers.ask_for_workers(early, early.option)
    assert (early.option.numprocesses, early.option.dist) == (None, "no")


def test_the_scheduler_hands_a_group_to_one_worker_as_one_unit(pytestconfig: pytest.Config,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook's unit of work: a module of `GROUPS` is its group's name, any other test
    itself; an xdist without the private name it replaces is refused, not silently ungrouped."""
    import xdist.scheduler  # type: ignore[import-untyped]  # xdist ships no types

    monkeypatch.setattr(pytestconfig.option, "dist", "loadgroup")
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"])  # the scheduler counts its workers
    config = pytestconfig
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    assert scheduler._split_scope("tests/capture/test_html.py::test_x") == "browser"
    assert scheduler._split_scope("tests/inspector/test_browser.py::test_y[1]") == "browser"
    assert scheduler._split_scope("tests/core/test_relay.py::test_z") == "tests/core/test_relay.py::test_z"
    assert conftest.pytest_xdist_make_scheduler(_config(dist="load"), None) is None

    class Renamed(xdist.scheduler.LoadScopeScheduling):  # type: ignore[misc]  # untyped base
        _split_scope = None

    monkeypatch.setattr(xdist.scheduler, "LoadScopeScheduling", Renamed)
    with pytest.raises(pytest.UsageError, match="_split_scope"):
        conftest.pytest_xdist_make_scheduler(config, None)
