"""`judgeblender grade`: grade items (question, answer, reference ...) with a jury of rubric judges.

Every --judge model is paired with every --prompt rubric; each pair is one jury member with
its own id (MODEL/PROMPT/generate), so no two members can overwrite each other. The items
file is JSONL, one object per line with the fields the rubrics declare as inputs (and an
optional "id"). The output is JSONL, one line per item: the pooled score and verdict, and
every member's score, reason or, for an invalid verdict, the reason it is invalid. A summary
goes to stderr: items, pooled scores, invalid verdicts per member, and how well the members
agree (Krippendorff's alpha, interval level, over the items each pair of members both scored).
Reading the items and building the records and the summary live in jury/grading.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .. import asyncrun
from ..errors import JudgeblenderError
from ..fileio import atomic_writer
from ..backends.registry import command_options
from ..judges import JudgeSpec
from ..jury import Jury
from ..jury.grading import item_record, jury_summary, read_items
from ..jury.combine import POOLING_METHODS, TIE_RULES
from ..prompts import get_template
from ..store import CallStore
from .console import console, err_console
from .options import (ApiKeyEnv, BaseUrl, Concurrency, Progress, RayAddress, RayWorkers, Threads, Timeout,
                      backend_options, fail_if_calls_failed)
from .progress import RichReporter


def print_summary(s: dict[str, Any]) -> None:
    table = Table(title="jury summary", title_justify="left")
    for col in ("judge", "valid", "invalid", "mean score", "calls made", "cached", "seconds"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for m in s["judges"]:
        mean = "-" if m["mean_score"] is None else f"{m['mean_score']:.3f}"
        table.add_row(m["judge"], str(m["valid"]), str(m["invalid"]), mean, str(m["calls_made"]),
                      str(m["cache_hits"]), f"{m['seconds']:.1f}")
    err_console.print(table)
    mean = "" if s["mean_pooled_score"] is None else f", mean {s['mean_pooled_score']:.3f}"
    err_console.print(f"items: {s['items']}; pooled ({s['pooling']}): {s['pooled']}{mean}; "
                      f"no pooled score: {s['unpooled']}", markup=False, soft_wrap=True)
    if s["passed"] or s["failed"]:
        err_console.print(f"verdicts: {s['passed']} pass, {s['failed']} fail", markup=False, soft_wrap=True)
    for m in s["judges"]:
        for reason, n in sorted(m["invalid_reasons"].items(), key=lambda kv: -kv[1]):
            err_console.print(f"invalid {m['judge']}: {n} items: {reason}", markup=False, soft_wrap=True)
    a = s["agreement"]
    shown = f"{a['alpha']:.3f}" if a["alpha"] is not None else f"undefined ({a['note']})"
    err_console.print(f"agreement between {a['members']} members: Krippendorff's alpha (interval) = {shown}"
                      f" over {a['pairable_items']} items", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def grade(
        items_path: Path = typer.Option(..., "--items", "-i", help="Items JSONL: one object per line with the rubric's input fields (and an optional id)."),
        models: list[str] = typer.Option(..., "--judge", "-j", help="Model string; repeat for a panel (e.g. llamacpp:default, openai:MODEL)."),
        prompts: list[str] = typer.Option(["factual-accuracy"], "--prompt", help="Rubric template name or .toml path; repeat: every judge uses every prompt."),
        out: Path = typer.Option(..., "--out", "-o", help="Results JSONL: one line per item."),
        pooling: str = typer.Option("mean", "--pooling", help=f"One of: {', '.join(POOLING_METHODS)}."),
        threshold: float = typer.Option(0.5, "--threshold", help="Pass threshold for votes, max/min and soft-vote (a score >= it passes)."),
        trim: float = typer.Option(0.1, "--trim", help="trimmed-mean: share of scores cut at each end."),
        tie: str = typer.Option("undecided", "--tie", help=f"hard-vote ties: {', '.join(TIE_RULES)}."),
        min_votes: int = typer.Option(1, "--min-votes", help="Fewer valid verdicts than this: no pooled score."),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store", help="SQLite store of every call (re-runs reuse it)."),
        invalid_policy: str = typer.Option("retry-once", "--invalid", help="retry-once (then invalid) or no-retry."),
        seed: int = typer.Option(0, "--seed"),
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        progress: Progress = True,
        ray_address: RayAddress = None,
        ray_workers: RayWorkers = None,
        as_json: bool = typer.Option(False, "--json", help="Also print the summary as one JSON object on stdout."),
    ) -> None:
        """Grade items (e.g. LLM answers) with a jury: every --judge x every --prompt, pooled."""
        if pooling not in POOLING_METHODS:
            raise JudgeblenderError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLING_METHODS)}")
        if tie not in TIE_RULES:
            raise JudgeblenderError(f"unknown tie rule {tie!r}; use one of {', '.join(TIE_RULES)}")
        templates = [get_template(p) for p in prompts]
        for t in templates:
            if not any(s.output == "json" for s in t.steps):
                raise JudgeblenderError(f"prompt {t.name!r} is not a rubric (it has no json step); "
                                        "`judgeblender prompts list` shows the rubrics")
        scales = {(tuple(t.score_range) if t.score_range else None, tuple(t.scale)) for t in templates}
        if len(scales) > 1:
            shown = ", ".join(f"{t.name}: {t.score_range or t.scale}" for t in templates)
            raise JudgeblenderError(f"the prompts score on different scales ({shown}); pool only rubrics on one scale")
        needed = list(dict.fromkeys(f for t in templates for f in t.inputs))
        items = read_items(items_path, needed)  # before any model loads: bad input fails fast
        opts = backend_options(threads, base_url, api_key_env, concurrency, timeout, None)
        specs = [JudgeSpec(model=m, prompt=p, options=command_options(m, opts), invalid_policy=invalid_policy, seed=seed)
                 for m in models for p in prompts]
        make_judge = None
        if ray_address is not None:  # Ray is imported only here; one set of workers per model
            from .ray_run import ray_done, ray_judges_cli

            make_judge = ray_judges_cli(specs, ray_address, ray_workers)
        try:
            with CallStore(store_path) as store:
                members = [make_judge(s) for s in specs] if make_judge else specs
                jury = Jury(members, pooling=pooling, threshold=threshold, trim=trim, tie=tie, min_votes=min_votes,
                            store=store)
                with RichReporter(progress) as reporter:
                    run = asyncrun.run(jury.arun(items, reporter))
        finally:
            if make_judge is not None:
                make_judge.close()
                ray_done()
        with atomic_writer(out, "w", encoding="utf-8") as f:  # a full disk leaves no half-written file
            for result in run.results:
                f.write(json.dumps(item_record(result), ensure_ascii=False) + "\n")
        s = jury_summary(run, pooling)
        print_summary(s)
        err_console.print(f"wrote {len(run.results)} graded items to {out}", markup=False, soft_wrap=True)
        if as_json:
            console.print_json(json.dumps({"out": str(out), **s}))
        fail_if_calls_failed(run.stats.values(), "verdicts (judge x item)")
