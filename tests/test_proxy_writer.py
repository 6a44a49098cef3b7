"""The proxy's answers go in by the store's one door (issue 40 part 1): each is made into its row
and committed by the store's writer process, not written by a thread of the proxy's own, and it
is returned only once committed. A real proxy subprocess in front of tests/openai_server.py; its
children read from /proc.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from test_proxy import ASK, Proxy

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the proxy's children from /proc")]


def children(pid: int) -> list[bytes]:
    """The command lines of `pid`'s child processes."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append((stat.parent / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile
    return found


def test_the_proxys_answers_are_committed_by_the_stores_writer_process(tmp_path):
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(answers="2") as up:
        proxy = Proxy(up.base_url, store)
        try:
            for seed in range(3):
                status, headers, _ = proxy.chat({**ASK, "seed": seed})
                assert (status, headers["x-judgeblender-cache"]) == (200, "miss")
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:  # committed before it was returned
                    assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == seed + 1
            writers = [c for c in children(proxy.proc.pid) if b"judgeblender.store.writer" in c]
            assert len(writers) == 1, children(proxy.proc.pid)
        finally:
            assert proxy.stop() == 0, proxy.logs.read_text()
