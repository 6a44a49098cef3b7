"""`judgeblender label`: label pairs by hand in a local web page; labels go to TREC qrels."""

from __future__ import annotations

import os
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Optional

import typer

from .. import paths
from ..errors import JudgeblenderError
from ..label.journal import Journal, hold_lock
from ..label.server import LabelServer
from ..label.session import LabelSession
from ..pairs import read_corpus, read_pairs, read_queries
from .console import err_console


def lock_output(out: Path) -> int:
    """Lock OUT.lock (a file of its own: OUT is replaced on every save, so a lock on it would not
    hold); the open descriptor holds the lock until closed or the process dies."""
    path = paths.lock_path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise JudgeblenderError(f"{path}: cannot create the lock file of --out ({exc.strerror})") from None
    hold_lock(fd, out, "this --out file")
    return fd


def _has_gui() -> bool:
    # Without a display, webbrowser falls back to text browsers that would take over this terminal.
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def register(app: typer.Typer) -> None:
    @app.command("label")
    def label_command(
        queries: Path = typer.Option(..., "--queries", "-q", help="Queries TSV: id<TAB>text."),
        corpus: Path = typer.Option(..., "--corpus", "-c", help="Passages JSONL."),
        pairs: Path = typer.Option(..., "--pairs", "-p", help="Pairs to label: 'qid docid' TSV, qrels or TREC run."),
        out: Path = typer.Option(..., "--out", "-o", help="Qrels of the labels, rewritten atomically on every save."),
        journal: Optional[Path] = typer.Option(None, "--journal", help="Append-only journal of every action [default: OUT.journal.jsonl]; resume reads it."),
        port: int = typer.Option(8765, "--port", help="Port on 127.0.0.1; 0 picks a free one."),
        open_browser: bool = typer.Option(True, "--open/--no-open", help="Open the page in the desktop browser (when there is a display)."),
    ) -> None:
        """Serve a labeling page on 127.0.0.1: one pair at a time, keys 0-3, back and skip; resumes where you stopped."""
        # --out, the journal and the lock file are distinct, and none is an input (cli/checks.py)
        journal = journal or paths.journal_path(out)
        out_lock = lock_output(out)  # one server per --out, whatever its journal; held until we return
        try:
            _serve(out, journal, queries, corpus, pairs, port, open_browser)
        finally:
            os.close(out_lock)


def _serve(out: Path, journal: Path, queries: Path, corpus: Path, pairs: Path, port: int, open_browser: bool) -> None:
    if out.exists() and not journal.exists():
        raise JudgeblenderError(f"{out} exists but its journal {journal} does not: refusing to overwrite labels "
                                "this session did not make (pass --journal, or another --out)")
    pair_list = read_pairs(pairs)
    query_texts = read_queries(queries)
    texts = read_corpus(corpus, wanted={p.docid for p in pair_list})
    log = Journal(journal)
    if log.torn_line is not None:
        err_console.print(f"warning: {journal}: cut off an unfinished last line left by a crash "
                          f"(never confirmed as saved): {log.torn_line[:80]!r}", markup=False)
    try:
        session = LabelSession(pair_list, query_texts, texts, log, out)
    except BaseException:
        log.close()
        raise
    try:
        server = LabelServer(session, port)
    except OSError as exc:
        session.close()
        raise JudgeblenderError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); try another --port") from None
    state = session.state()
    if session.foreign:
        err_console.print(f"note: the journal holds {len(session.foreign)} label(s) for pairs not in {pairs}; "
                          "they stay in the exported qrels", markup=False)
    # The URL line goes to stdout and is flushed: scripts and tests read the port from it.
    print(f"labeling {state['total']} pairs ({state['labelled']} labelled, {state['skipped']} skipped) "
          f"at {server.url}", flush=True)
    err_console.print(f"labels: {out} (qrels, rewritten on every save), journal: {journal}; Ctrl+C stops",
                      markup=False)
    if open_browser and _has_gui():
        threading.Timer(0.3, webbrowser.open, args=(server.url,)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        session.close()
        state = session.state()
        err_console.print(f"stopped: {state['labelled']} of {state['total']} labelled, in {out}", markup=False)
