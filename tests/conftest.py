"""Shared fixtures: a tiny offline dataset and a queue-based scripted model registered as `mock:`."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # helper modules such as openai_server

from judgeblender.backends import registry  # noqa: E402
from judgeblender.backends.scripted import ScriptedBackend  # noqa: E402

SHARED_DATA = TESTS.parents[1] / "shared" / "data"

# A suite started as a background job of a script (`make test &`, nohup from a non-interactive
# shell) inherits SIGINT ignored, as POSIX has a shell do for asynchronous lists without job
# control; so would every CLI it starts. The tests that send Ctrl+C (tests/test_exit_status.py,
# tests/test_crash.py, ...) would then see a run judge to its end and exit 0, as the command
# rightly does when its caller ignores SIGINT. Python's own handler is put back, so the suite
# judges what a user at a terminal meets wherever it is started (the children get the default
# action at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

try:  # property-based tests (the [dev] extra): the same examples on every CI run
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("ci" if os.environ.get("CI") else "dev")
except ImportError:  # pragma: no cover - without the dev extra the property tests are skipped
    pass


@pytest.fixture
def tiny() -> Path:
    return TESTS / "data" / "tiny"


@pytest.fixture
def mock_model():
    """A scripted model reachable as `mock:NAME`; tests set its rules, queue or default."""
    backend = ScriptedBackend(name="mock")
    registry.register("mock", lambda rest, **_: backend)
    yield backend
    registry.unregister("mock")


def pytest_collection_modifyitems(config, items):
    if not SHARED_DATA.exists():
        skip = pytest.mark.skip(reason=f"shared data not found at {SHARED_DATA}")
        for item in items:
            if "shared_data" in item.keywords:
                item.add_marker(skip)


# Ray workers started by the tests import this checkout's judgeblender, whatever is installed
RAY_PYTHONPATH = os.pathsep.join([str(TESTS.parent / "src"), os.environ.get("PYTHONPATH", "")])


@pytest.fixture(scope="module")
def cluster():
    """A real Ray runtime for the module: 2 CPUs, a small object store, no dashboard; its GCS address."""
    ray = pytest.importorskip("ray")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["PYTHONPATH"] = RAY_PYTHONPATH
    ray.init(address="local", num_cpus=2, object_store_memory=200 * 1024**2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()



@pytest.fixture(autouse=True)
def _notes_shown_afresh():
    """Each test sees judgeblender's notes as a fresh process does (judgeblender/notes.py shows a
    note once per process): a test asserting a note must not depend on which tests ran before."""
    from judgeblender import notes

    notes.forget()
    yield
