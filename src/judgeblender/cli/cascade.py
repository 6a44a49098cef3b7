"""`judgeblender cascade`: a cheap scorer labels every pair, LLM judges only the doubtful ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .. import paths
from ..errors import JudgeblenderError
from ..backends.registry import command_options
from ..judges import JudgeSpec, build_judge, resolve_pairs
from ..panels.cascade import CascadePolicy, cascade
from ..judges.factory import PAIR_JUDGES
from ..judges.judge import DEFAULT_MIN_CHOICE_MASS
from ..pairs import read_corpus, read_pairs, read_queries
from ..pairs.qrels import write_qrels
from ..fileio import atomic_write_text, outputs_together
from ..store import CallStore
from .console import console, err_console
from .judge import print_summary
from .options import (ApiKeyEnv, BaseUrl, Concurrency, MinChoiceMass, Progress, RayAddress, RayWorkers, Threads,
                      Timeout, backend_options, fail_if_calls_failed)
from .progress import RichReporter


def _scorer_options(threshold, thresholds, seed_qrels, fit) -> dict:
    opts: dict = {"fit": fit}
    if threshold is not None:
        opts["threshold"] = threshold
    if thresholds is not None:
        try:
            opts["thresholds"] = [float(t) for t in thresholds.split(",")]
        except ValueError:
            raise JudgeblenderError(f"--thresholds takes three comma-separated numbers, got {thresholds!r}") from None
    if seed_qrels is not None:
        opts["seed_qrels"] = str(seed_qrels)
    return opts


def register(app: typer.Typer) -> None:
    @app.command("cascade")
    def cascade_cmd(
        queries: Path = typer.Option(..., "--queries", "-q", help="Queries TSV: id<TAB>text (gzip ok)."),
        corpus: Path = typer.Option(..., "--corpus", "-c", help="Passages JSONL."),
        pairs: Path = typer.Option(..., "--pairs", "-p", help="Pairs: qrels, TREC run, or 'qid docid' TSV."),
        out: Path = typer.Option(..., "--out", "-o", help="Output qrels: every pair's final label."),
        cheap: list[str] = typer.Option(["embed:default"], "--cheap", help="Cheap scorer(s): embed:default, embed:PATH, cross:PATH. The first one's label is kept on pairs the LLM does not see."),
        threshold: Optional[float] = typer.Option(None, "--threshold", help="Cheap labels: score >= T -> 2, else 0 [0.5]."),
        thresholds: Optional[str] = typer.Option(None, "--thresholds", help="Cheap labels 0-3: three cut points 'a,b,c'."),
        seed_qrels: Optional[Path] = typer.Option(None, "--seed-qrels", help="Fit the cheap cut points on the pairs this qrels labels."),
        fit: str = typer.Option("graded", "--fit", help="What --seed-qrels fitting maximises kappa of: graded (0-3) or binary."),
        models: list[str] = typer.Option(["llamacpp:default"], "--judge", "-j", help="LLM judge model string(s)."),
        prompt: str = typer.Option("umbrela", "--prompt", help="LLM prompt template."),
        mode: str = typer.Option("generate", "--mode", "-m", help="LLM scoring mode: generate or logprobs."),
        budget: Optional[int] = typer.Option(None, "--budget", help="Most LLM judgments (one LLM judge on one pair)."),
        band: Optional[tuple[float, float]] = typer.Option(None, "--band", help="Cheap scores LOW..HIGH are uncertain."),
        disagreement: bool = typer.Option(True, "--disagreement/--no-disagreement", help="Send pairs the cheap judges label differently to the LLM."),
        min_choice_mass: MinChoiceMass = DEFAULT_MIN_CHOICE_MASS,
        blend: str = typer.Option("mv", "--blend", help="How several LLM judges' labels become one (see `blend --methods`)."),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store", help="SQLite store (calls, vectors, judgments)."),
        details: Optional[Path] = typer.Option(None, "--details", help="Per-pair details JSONL [default: OUT.details.jsonl]."),
        pairs_format: str = typer.Option("auto", "--pairs-format"),
        depth: Optional[int] = typer.Option(None, "--depth", help="With a run file: its top-k per query."),
        skip_missing: bool = typer.Option(False, "--skip-missing", help="Judge the pairs that can be, report the rest."),
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        progress: Progress = True,
        ray_address: RayAddress = None,
        ray_workers: RayWorkers = None,
        json_summary: bool = typer.Option(False, "--json", help="Print the counts as JSON on stdout."),
    ) -> None:
        """Judge every pair with a cheap scorer and only the doubtful ones with LLM judges."""
        bad = [m for m in cheap if m.partition(":")[0] not in PAIR_JUDGES]
        if bad:
            raise JudgeblenderError(f"--cheap takes scorer models ({', '.join(f'{p}:' for p in PAIR_JUDGES)}), "
                                    f"got {bad[0]!r}")
        policy = CascadePolicy(budget=budget, band=band, disagreement=disagreement)
        query_map = read_queries(queries)
        pair_list = read_pairs(pairs, pairs_format, depth)
        passages = read_corpus(corpus, wanted={p.docid for p in pair_list})
        # a missing query or passage: an error before any scorer loads, Ray starts or the store is created
        resolve_pairs(pair_list, query_map, passages, skip_missing)
        scorer_opts = _scorer_options(threshold, thresholds, seed_qrels, fit)
        shared = {"n_threads": threads} if threads else {}
        cheap_judges = [build_judge(JudgeSpec(model=m, options={**scorer_opts, **command_options(m, shared)}))
                        for m in cheap]
        opts = backend_options(threads, base_url, api_key_env, concurrency, timeout, None)
        llm_specs = [JudgeSpec(model=m, prompt=prompt, mode=mode, options=command_options(m, opts),
                               min_choice_mass=min_choice_mass) for m in models]  # ids: judges/judge.py spec_id
        make_judge = build_judge
        if ray_address is not None:  # the LLM judges' calls on Ray; the cheap scorers stay here
            from .ray_run import ray_done, ray_judges_cli

            make_judge = ray_judges_cli(llm_specs, ray_address, ray_workers)
        try:
            llm_judges = [make_judge(s) for s in llm_specs]
            with CallStore(store_path) as store, RichReporter(progress) as reporter:
                result = cascade(cheap_judges, llm_judges, pair_list, query_map, passages, store, policy, reporter,
                                 blend, skip_missing)
            for j in llm_judges:
                j.close()
        finally:
            if ray_address is not None:
                make_judge.close()
                ray_done()
        details_path = details or paths.details_path(out)
        lines = []
        for p in result.pairs:
            rec = {"qid": p.qid, "docid": p.docid, "label": result.labels[p], "source": result.provenance[p],
                   "cheap": {jid: {"score": js[p].score, "label": js[p].label}
                             for jid, js in result.cheap.judgments.items()}}
            if result.llm and p in result.llm.judgments[llm_judges[0].id]:
                rec["llm"] = {jid: js[p].record() for jid, js in result.llm.judgments.items()}
            lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
        with outputs_together():  # the qrels and their details, or neither (a full disk on the second)
            write_qrels(out, result.qrels())
            atomic_write_text(details_path, "".join(lines))
        print_summary(result.cheap)
        if result.llm:
            print_summary(result.llm, skipped_note=False)
        counts = result.counts()
        err_console.print(
            f"{counts['escalated']} of {counts['pairs']} pairs went to the LLM judges ({counts['uncertain']} "
            f"uncertain): {counts['llm_judgments']} LLM judgments instead of {counts['all_llm_judgments']} "
            f"({counts['llm_share']:.0%}), {counts['llm_calls']} calls made, {counts['llm_cache_hits']} from the store")
        err_console.print(f"wrote {sum(lab is not None for lab in result.labels.values())} labels to {out} "
                          f"and details to {details_path}")
        if json_summary:
            console.print_json(json.dumps({"qrels": str(out), "details": str(details_path), **counts}))
        if result.llm:
            fail_if_calls_failed(result.llm.stats.values(), "LLM judgments (judge x pair)")
