"""A pytest plugin for `python -m tapegpu selftest`'s tests step (`pytest -p
tapegpu.cli.pytest_log`): with TAPEGPU_SELFTEST_LOG set, each test's start and outcome is
appended to that file as one JSON line as it happens, flushed (a run killed at its timeout
leaves what it ran, and which tests had started and not finished); with
TAPEGPU_SELFTEST_DEVICE set, only the tests parametrized with that `tg_device` (and those
marked `gpu`) are kept. Under pytest-xdist the controller writes the lines (the workers only
select)."""
import json
import os
import time

import pytest

_log = [None]  # the open log file of this process (the controller's), or None


def pytest_configure(config):
    path = os.environ.get("TAPEGPU_SELFTEST_LOG")
    if path and not hasattr(config, "workerinput"):  # an xdist worker: the controller logs
        _log[0] = open(path, "a", buffering=1)  # noqa: SIM115 (closed at unconfigure)


def pytest_unconfigure(config):
    if _log[0] is not None and not hasattr(config, "workerinput"):
        _log[0].close()
        _log[0] = None


def _write(record):
    if _log[0] is not None:
        _log[0].write(json.dumps(record) + "\n")
        _log[0].flush()


def pytest_collection_modifyitems(config, items):
    device = os.environ.get("TAPEGPU_SELFTEST_DEVICE")
    if not device:
        return
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (keep if params.get("tg_device") == device or "gpu" in item.keywords
         else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput") and session.items:
        _write({"selected": len(session.items)})  # without xdist


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _write({"selected": len(ids), "worker": str(getattr(node, "gateway", node).id)})


def pytest_runtest_logstart(nodeid, location):
    _write({"start": nodeid, "t": round(time.time(), 3)})


def pytest_runtest_logreport(report):
    failed_setup = report.when == "setup" and report.outcome != "passed"
    if report.when == "call" or failed_setup or (report.when == "teardown" and
                                                report.outcome == "failed"):
        outcome = report.outcome
        if report.when != "call" and outcome == "failed":
            outcome = "error"
        record = {"test": report.nodeid, "outcome": outcome, "when": report.when,
                  "seconds": round(getattr(report, "duration", 0.0), 3)}
        if outcome in ("failed", "error"):
            record["message"] = str(report.longrepr)[-1500:]
        elif outcome == "skipped" and isinstance(report.longrepr, tuple):
            record["message"] = str(report.longrepr[2])[:200]
        _write(record)
