"""Calibration you can re-run: the panel file from `calibrate` runs as written with `judge --panel`
(models, prompts, modes and options kept; label-file judges mapped or refused with the hint), and
`blend --panel` applies it to label files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgeblender.blend import Blender, load_qrels_ballots
from judgeblender.cli import app
from judgeblender.errors import InputError
from judgeblender.panels.panel import load_panel
from judgeblender.panels.panel_file import load_blend_panel, parse_judge_model

from test_select import seed_set

SRC = str(Path(__file__).resolve().parents[1] / "src")


def write_labels(tmp_path, table, gold, judges=None):
    qrels = tmp_path / "human.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {l}\n" for q, docs in gold.items() for d, l in docs.items()))
    paths = []
    for j, judge in enumerate(table.judges):
        if judges and judge not in judges:
            continue
        p = tmp_path / f"{judge}.qrels"
        p.write_text("".join(f"{q} 0 {d} {table.labels[i, j]}\n" for i, (q, d) in enumerate(table.pairs)))
        paths.append(p)
    return qrels, paths


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_judge_model_reads_prompt_and_mode_from_the_right_so_models_may_hold_slashes():
    assert parse_judge_model("a=hf:org/model/thomas/logprobs") == ("a", "hf:org/model", "thomas", "logprobs")
    assert parse_judge_model("a=hf:org/model/thomas") == ("a", "hf:org/model", "thomas", None)
    assert parse_judge_model("a=hf:org/model") == ("a", "hf:org/model", None, None)


def test_a_label_file_judge_mapped_with_judge_model_runs_as_written(tmp_path):
    table, gold = seed_set()
    qrels, paths = write_labels(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    args = ["calibrate", "--select", "--fast-only", "--gold", qrels, "-o", out,
            "--judge-model", "perfect=llamacpp:default/thomas/logprobs"]
    for p in paths:
        args += ["--labels", p]
    result = CliRunner().invoke(app, list(map(str, args)))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "# Cost-quality frontier" in text and "<- chosen" in text
    panel = load_panel(out, "generate", {})
    assert [(s.id, s.model, s.prompt, s.mode) for s in panel.judges] == [
        ("perfect", "llamacpp:default", "thomas", "logprobs")]


def test_an_unmapped_label_file_judge_is_refused_by_judge_panel_with_the_hint(tmp_path):
    table, gold = seed_set()
    qrels, paths = write_labels(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    args = ["calibrate", "--select", "--fast-only", "--gold", qrels, "-o", out, *sum((["--labels", p] for p in paths), [])]
    assert CliRunner().invoke(app, list(map(str, args))).exit_code == 0
    with pytest.raises(InputError) as err:
        load_panel(out, "generate", {})
    header = out.read_text().splitlines().index("[[judges]]") + 1
    assert str(err.value).startswith(f"{out}:{header}: expected judge 1 (perfect): a model")
    assert "--judge-model NAME=MODEL[/PROMPT[/MODE]]" in str(err.value)


def test_the_judging_panels_options_reach_the_calibrated_file(tmp_path):
    table, gold = seed_set()
    ids = {"perfect": "p", "noisy": "n", "twos": "t", "lenient": "l"}
    panel_in = tmp_path / "jury.toml"
    panel_in.write_text('name = "jury"\n' + "".join(
        f'[[judges]]\nid = "{ids[j]}"\nmodel = "openai:m-{ids[j]}"\nprompt = "thomas"\nmode = "generate"\n'
        f'options = {{ base_url = "http://127.0.0.1:9/v1", concurrency = 4 }}\n' for j in JUDGES_ORDER))
    details = tmp_path / "d.jsonl"
    with details.open("w") as fh:
        for i, (q, d) in enumerate(table.pairs):
            votes = {ids[j]: {"label": int(table.labels[i, k])} for k, j in enumerate(table.judges)}
            fh.write(json.dumps({"qid": q, "docid": d, "judges": votes}) + "\n")
    qrels, _ = write_labels(tmp_path, table, gold, judges=[])
    out = tmp_path / "calibrated.toml"
    result = CliRunner().invoke(app, list(map(str, ["calibrate", "--select", "--fast-only", "--gold", qrels,
                                                    "--details", details, "--panel", panel_in, "-o", out])))
    assert result.exit_code == 0, result.output
    panel = load_panel(out, "logprobs", {})
    assert [(s.id, s.model, s.prompt, s.mode, s.options) for s in panel.judges] == [
        ("p", "openai:m-p", "thomas", "generate", {"base_url": "http://127.0.0.1:9/v1", "concurrency": 4})]


JUDGES_ORDER = ["perfect", "noisy", "twos", "lenient"]


def test_blend_panel_applies_the_members_method_and_thresholds_to_other_label_files(tmp_path):
    table, gold = seed_set()
    _, paths = write_labels(tmp_path, table, gold)
    panel = tmp_path / "p.toml"
    panel.write_text('name = "two"\n[aggregator]\nmethod = "prob-expected"\nthresholds = [0.7, 1.2, 2.9]\n'
                     '[[judges]]\nid = "noisy"\n[[judges]]\nid = "lenient"\n')
    out = tmp_path / "blend.qrels"
    result = cli("blend", "--panel", panel, *paths, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "not on the panel, left out: perfect, twos" in result.stderr
    sub = load_qrels_ballots(paths).only_judges(["noisy", "lenient"])
    want = Blender("prob-expected", thresholds=(0.7, 1.2, 2.9)).blend(sub).qrels()
    got = {}
    for line in out.read_text().splitlines():
        q, _, d, lab = line.split()
        got.setdefault(q, {})[d] = int(lab)
    assert got == want


def test_blend_panel_without_a_members_label_file_is_one_error_line_naming_the_panel(tmp_path):
    table, gold = seed_set()
    _, paths = write_labels(tmp_path, table, gold, judges=["noisy"])
    panel = tmp_path / "p.toml"
    panel.write_text('[[judges]]\nid = "noisy"\n[[judges]]\nid = "lenient"\n')
    result = cli("blend", "--panel", panel, *paths, "-o", tmp_path / "o.qrels")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {panel}: expected a label file for every member of panel p (name files NAME=PATH), "
        f"got 'none for lenient; given: noisy'"]


def test_blend_panel_refuses_method_options_beside_it(tmp_path):
    panel = tmp_path / "p.toml"
    panel.write_text('[[judges]]\nid = "a"\n')
    labels = tmp_path / "a.qrels"
    labels.write_text("q 0 d 1\n")
    result = cli("blend", "--panel", panel, "--method", "max", labels, "-o", tmp_path / "o.qrels")
    assert result.returncode == 2 and "the panel file sets the method" in result.stderr


def test_calibrate_then_blend_panel_is_two_commands_and_reproduces_the_chosen_blend(tmp_path):
    table, gold = seed_set()
    qrels, paths = write_labels(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    r1 = cli("calibrate", "--select", "--gold", qrels, *sum((["--labels", p] for p in paths), []), "-o", out)
    assert r1.returncode == 0, r1.stderr
    r2 = cli("blend", "--panel", out, *paths, "-o", tmp_path / "b.qrels")
    assert r2.returncode == 0, r2.stderr
    assert load_blend_panel(out).judges == ["perfect"]
    assert (tmp_path / "b.qrels").read_text() == (tmp_path / "perfect.qrels").read_text()


def test_cost_from_store_is_each_judges_mean_calls_per_pair_and_a_given_price_wins(tmp_path):
    from judgeblender.cli.calibrate_select import store_costs
    from judgeblender.store import CallStore

    store = tmp_path / "s.sqlite"
    with CallStore(store) as s:
        s.put_judgments("two-step", [("q1", "d1", {"label": 1, "steps": [{"step": "a"}, {"step": "b"}]}),
                                     ("q1", "d2", {"label": 0, "steps": [{"step": "a"}]})])
        s.put_judgments("one-step", [("q1", "d1", {"label": 1, "steps": [{"step": "grade"}]})])
    assert store_costs(store, ["two-step", "one-step", "absent"]) == {"two-step": 1.5, "one-step": 1.0}

    table, gold = seed_set()
    qrels, paths = write_labels(tmp_path, table, gold)
    with CallStore(store) as s:
        s.put_judgments("perfect", [("q1", "d1", {"label": 1, "steps": [{"step": "a"}] * 4})])
    out = tmp_path / "p.toml"
    result = CliRunner().invoke(app, list(map(str, [
        "calibrate", "--select", "--fast-only", "--gold", qrels, *sum((["--labels", p] for p in paths), []),
        "--store", store, "--cost-from-store", "--cost", "noisy=0.5", "-o", out])))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "# Measured from the store" in text and "perfect=4" in text
    assert "# Cost per pair used: perfect=4, noisy=0.5 (others 1)." in text
