"""`--ray`: judging on a real local Ray runtime (started once for this module, 2 CPUs).

The same pairs judged with and without Ray give byte-identical qrels, and details identical but
for the `workers` record Ray adds; a worker killed with kill -9 mid-run and a driver killed and
restarted lose nothing and ask the model no more than the calls in flight at the kill again."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import RAY_PYTHONPATH
from openai_server import OpenAITestServer

from judgeblender.calls import CallRequest, Message
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.judges.outputs import final_labels, write_details, write_qrels_file
from judgeblender.backends.ray_executor import WorkerPlan, plan_workers
from judgeblender.pairs import read_corpus, read_pairs, read_queries
from judgeblender.store import CallStore



def environ(**extra) -> dict:
    """This process's environment now (after ray.init it holds RAY_AUTH_MODE, which drivers joining the
    cluster need), with this checkout's sources first."""
    return {**os.environ, "PYTHONPATH": RAY_PYTHONPATH, "RAY_USAGE_STATS_ENABLED": "0", **extra}
SCRIPT = {"name": "tiny-judge", "rules": [
    {"contains": "flakes", "output": "##final score: 3"}, {"contains": "freshwater", "output": "##final score: 1"},
    {"contains": "330 metres", "output": "##final score: 2"}, {"contains": "capital", "output": "no idea"}]}


def answer(body) -> str:
    """A deterministic grade from the prompt; one prompt in six gets an unparseable answer."""
    text = body["messages"][-1]["content"]
    n = int(hashlib.sha256(text.encode()).hexdigest(), 16) % 6
    return "no idea" if n == 5 else f"##final score: {min(n, 3)}"


def cli(*args, env=None, check=True, timeout=180):
    proc = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=environ(**(env or {})), timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strip_workers(details: str) -> str:
    """A details file without the `workers` record that only a Ray run has."""
    out = []
    for line in details.splitlines(keepends=True):
        rec = json.loads(line)
        for j in rec.get("judges", {}).values():
            j.pop("workers", None)
        out.append(json.dumps(rec, ensure_ascii=False) + "\n")
    return "".join(out)


def workers_of(details: str) -> list[dict]:
    return [w for line in details.splitlines() for j in json.loads(line).get("judges", {}).values()
            for w in j.get("workers", [])]




@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """300 pairs: 30 queries x 10 passages."""
    d = tmp_path_factory.mktemp("pairs300")
    (d / "queries.tsv").write_text("".join(f"q{i}\tquestion number {i} about topic {i % 7}\n" for i in range(30)))
    (d / "corpus.jsonl").write_text("".join(json.dumps({"docid": f"d{k}", "text": f"passage {k} says {k * 37 % 101}"})
                                            + "\n" for k in range(10)))
    (d / "pairs.tsv").write_text("".join(f"q{i}\td{k}\n" for i in range(30) for k in range(10)))
    return d


def load(d: Path):
    return read_queries(d / "queries.tsv"), read_corpus(d / "corpus.jsonl"), read_pairs(d / "pairs.tsv", "tsv")


def write(run, out: Path) -> tuple[bytes, str]:
    labels = final_labels(run)
    write_qrels_file(out, run, labels)
    write_details(out.with_suffix(".details"), run, labels)
    return out.read_bytes(), out.with_suffix(".details").read_text()


def served_spec(server, concurrency=4) -> JudgeSpec:
    return JudgeSpec(model="openai:test-model", options={"base_url": server.base_url, "timeout_s": 10.0,
                                                         "backoff_base_s": 0.01, "concurrency": concurrency})


def test_worker_plan_from_the_judges_options():
    res = {"CPU": 8.0, "GPU": 2.0}
    assert plan_workers("llamacpp:default", {"n_threads": 2}, None, res, 1) == WorkerPlan(4, 2.0, 0.0, 1)
    assert plan_workers("hf:m", {"device": "cuda"}, None, res, 1).workers == 2
    served = plan_workers("openai:m", {"concurrency": 64}, 4, res, 2)
    assert (served.workers, served.concurrency, served.cpus) == (4, 16, 0.5)
    assert plan_workers("openai:m", {}, None, res, 3).workers == 3  # one per node
    with pytest.raises(Exception, match="the cluster has 8 CPUs"):
        plan_workers("llamacpp:default", {"n_threads": 4}, 3, res, 1)


@pytest.mark.ray
def test_scripted_judge_same_output_with_and_without_ray(cluster, tmp_path, tiny):
    from judgeblender.judges.ray_judges import ray_judge

    model = tmp_path / "model.json"
    model.write_text(json.dumps(SCRIPT))
    data = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    pairs = read_pairs(tiny / "qrels.txt")
    spec = JudgeSpec(model=f"scripted:{model}")
    local = write(judge_pairs([Judge(spec)], pairs, *data), tmp_path / "local.qrels")
    judge = ray_judge(spec, workers=2)
    try:
        assert judge.backend.identity() == Judge(spec).backend.identity()  # same store keys
        # the workers import this checkout's judgeblender, in processes of their own
        import judgeblender

        assert {i["judgeblender"] for i in judge.backend.workers_info} == {judgeblender.__file__}
        with CallStore(tmp_path / "ray.sqlite") as store:
            remote = write(judge_pairs([judge], pairs, *data, store=store), tmp_path / "ray.qrels")
        # a call from synchronous code goes to a worker too, and answers as the local model does
        request = CallRequest((Message("user", "Passage: Goldfish eat flakes, pellets and peas."),))
        sync = judge.backend.execute(request)
        assert sync.text == Judge(spec).backend.execute(request).text == "##final score: 3"
        assert sync.extra["worker"]["pid"] != os.getpid()
    finally:
        judge.close()
    assert remote[0] == local[0]
    assert strip_workers(remote[1]) == local[1]
    assert os.getpid() not in {w["pid"] for w in workers_of(remote[1])}


@pytest.mark.ray
def test_300_served_pairs_two_workers_identical_then_zero_calls(cluster, tmp_path, dataset):
    """The issue's "done when": 300 pairs, --ray-workers 2, output identical to the local run,
    nothing stored twice, a re-run makes zero calls; two workers, neither the driver, answered."""
    with OpenAITestServer(answer, max_requests=5000) as server:
        base = ["judge", "-q", dataset / "queries.tsv", "-c", dataset / "corpus.jsonl", "-p", dataset / "pairs.tsv",
                "-j", "openai:test-model", "--base-url", server.base_url, "--concurrency", "8", "--no-progress",
                "--json"]
        env = {"OPENAI_API_KEY": "sk-test"}
        cli(*base, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite", env=env)
        local_requests = server.request_count
        server.reset_counters()
        run = cli(*base, "-o", tmp_path / "ray.qrels", "--store", tmp_path / "ray.sqlite", "--ray", cluster,
                  "--ray-workers", "2", env=env)
        summary = json.loads(run.stdout)["judges"][0]
        assert server.request_count == local_requests == summary["calls_made"]
        assert server.max_in_flight <= 8
        server.reset_counters()
        again = json.loads(cli(*base, "-o", tmp_path / "ray2.qrels", "--store", tmp_path / "ray.sqlite",
                               "--ray", cluster, "--ray-workers", "2", env=env).stdout)["judges"][0]
        assert server.request_count == 0 and again["calls_made"] == 0
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()
    local_details = (tmp_path / "local.qrels.details.jsonl").read_text()
    ray_details = (tmp_path / "ray.qrels.details.jsonl").read_text()
    assert strip_workers(ray_details) == local_details
    with sqlite3.connect(tmp_path / "ray.sqlite") as db:
        keys = [k for (k,) in db.execute("SELECT key FROM calls")]
        assert len(keys) == len(set(keys)) == local_requests
    pids = {w["pid"] for w in workers_of(ray_details)}
    assert len(pids) >= 2 and os.getpid() not in pids
    assert "Ray: 2 workers" in run.stderr


@pytest.mark.ray
def test_a_worker_killed_mid_run_loses_nothing(cluster, tmp_path, dataset):
    from judgeblender.judges.ray_judges import ray_judge

    queries, corpus, pairs = load(dataset)
    pairs = pairs[:120]
    with OpenAITestServer(answer, delay_s=0.05, max_requests=5000) as server:
        local = write(judge_pairs([Judge(served_spec(server))], pairs, queries, corpus), tmp_path / "local.qrels")
        calls = server.request_count
        server.reset_counters()
        judge = ray_judge(served_spec(server), workers=2)
        box: dict = {}

        def run() -> None:
            with CallStore(tmp_path / "ray.sqlite") as store:
                box["run"] = judge_pairs([judge], pairs, queries, corpus, store=store)

        try:
            victim = judge.backend.worker_pids()[0]  # found through the actor
            thread = threading.Thread(target=run)
            thread.start()
            while server.request_count < 30 and thread.is_alive():
                time.sleep(0.01)
            in_flight = server.in_flight
            os.kill(victim, signal.SIGKILL)
            thread.join(120)
            assert not thread.is_alive()
            assert victim not in judge.backend.worker_pids()  # restarted: a new process
        finally:
            judge.close()
        remote = write(box["run"], tmp_path / "ray.qrels")
        # asked twice: only what the victim had in flight at the kill, at most its share of the concurrency
        redone = server.request_count - calls
        assert redone <= judge.backend.plan.concurrency, (redone, in_flight)
    assert remote[0] == local[0]
    assert strip_workers(remote[1]) == local[1]
    with CallStore(tmp_path / "ray.sqlite") as store:
        assert store.count_calls() == calls
    pids = {w["pid"] for w in workers_of(remote[1])}
    assert victim in pids and len(pids) >= 3  # answers from the victim, its successor and the other worker


@pytest.mark.ray
def test_a_killed_driver_resumes_from_the_store(cluster, tmp_path, dataset):
    with OpenAITestServer(answer, delay_s=0.05, max_requests=5000) as server:
        base = ["judge", "-q", dataset / "queries.tsv", "-c", dataset / "corpus.jsonl", "-p", dataset / "pairs.tsv",
                "--limit", "150", "-j", "openai:test-model", "--base-url", server.base_url, "--concurrency", "4",
                "--no-progress", "--json"]
        env = {"OPENAI_API_KEY": "sk-test"}
        cli(*base, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite", env=env)
        calls = server.request_count
        store = tmp_path / "ray.sqlite"
        driver = subprocess.Popen([sys.executable, "-m", "judgeblender", *map(str, base), "-o", tmp_path / "ray.qrels",
                                   "--store", store, "--ray", cluster, "--ray-workers", "2"],
                                  env=environ(**env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        stored = 0
        while stored < 40 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.1)
            if store.exists():
                try:
                    with sqlite3.connect(store) as db:
                        stored = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
                except sqlite3.OperationalError:  # the schema is not there yet
                    pass
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        assert 40 <= stored < calls, "the driver was not killed mid-run"
        with sqlite3.connect(store) as db:
            before = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        server.reset_counters()
        again = json.loads(cli(*base, "-o", tmp_path / "ray.qrels", "--store", store, "--ray", cluster,
                               "--ray-workers", "2", env=env).stdout)["judges"][0]
        assert again["cache_hits"] == before and again["calls_made"] == calls - before
        # the dead driver's workers may finish their calls in flight before Ray removes them
        assert calls - before <= server.request_count <= calls - before + 4
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()


def test_without_ray_flag_ray_is_never_imported(tmp_path, tiny):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SCRIPT))
    code = ("import sys\nfrom judgeblender.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('RAY' if 'ray' in sys.modules else 'NO-RAY')\n")
    proc = subprocess.run([sys.executable, "-c", code, "judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl",
                           "-p", tiny / "qrels.txt", "-o", tmp_path / "o.qrels", "--store", tmp_path / "s.sqlite",
                           "-j", f"scripted:{model}", "--no-progress"], capture_output=True, text=True, env=environ(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("NO-RAY")


def one_error(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("error:") == 1
    return proc.stderr


def test_ray_not_installed_is_an_error_naming_the_extra(tmp_path, tiny):
    code = "import sys\nsys.modules['ray'] = None  # blocks `import ray`\nfrom judgeblender.cli import main\nmain()\n"
    proc = subprocess.run([sys.executable, "-c", code, "judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl",
                           "-p", tiny / "qrels.txt", "-o", tmp_path / "o.qrels", "--store", tmp_path / "s.sqlite",
                           "-j", "scripted:x.json", "--ray", "local"], capture_output=True, text=True, env=environ(),
                          timeout=60)
    assert "judgeblender[ray]" in one_error(proc)


@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "auto"])
def test_a_dead_address_is_an_error_within_seconds(tmp_path, tiny, address):
    pytest.importorskip("ray")
    started = time.monotonic()
    env = {k: v for k, v in environ().items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", tiny / "queries.tsv", "-c",
                           tiny / "corpus.jsonl", "-p", tiny / "qrels.txt", "-o", tmp_path / "o.qrels", "--store",
                           tmp_path / "s.sqlite", "-j", "scripted:x.json", "--ray", address.format(port=free_port())],
                          capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - started < 10
    err = one_error(proc)
    assert ("RAY_ADDRESS" in err) if address == "auto" else ("no Ray cluster answers" in err)


@pytest.mark.ray
def test_a_model_file_missing_on_a_worker_node_is_one_error_naming_the_node(cluster, tmp_path, tiny):
    proc = cli("judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl", "-p", tiny / "qrels.txt",
               "-o", tmp_path / "o.qrels", "--store", tmp_path / "s.sqlite", "-j", f"scripted:{tmp_path}/nowhere.json",
               "--ray", cluster, "--ray-workers", "1", check=False)
    err = one_error(proc)
    assert "a Ray worker on node" in err and "nowhere.json" in err and "every node" in err


@pytest.mark.ray
def test_ray_local_starts_and_stops_its_own_runtime(tmp_path, tiny):
    pytest.importorskip("ray")
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SCRIPT))
    args = ["judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl", "-p", tiny / "qrels.txt",
            "-j", f"scripted:{model}", "--no-progress"]
    cli(*args, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite")
    env = {k: v for k, v in environ().items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args), "-o", tmp_path / "ray.qrels",
                           "--store", tmp_path / "ray.sqlite", "--ray", "local", "--ray-workers", "1"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "Ray: 1 worker of" in proc.stderr
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()


# a handful of DL19-like pairs (TREC DL 2019 style questions, MS MARCO style passages)
DL19_QUERIES = {
    "1037798": "who is robert gray",
    "1110199": "what is wifi vs bluetooth",
    "1129237": "hydrogen is a liquid below what temperature",
}
DL19_PASSAGES = {
    "p1": "Robert Gray (May 10, 1755 - 1806) was an American merchant sea-captain who is known for his "
          "achievements in connection with two trading voyages to the northern Pacific coast of North America.",
    "p2": "Gray is a surname of English and Scottish origin. People with the surname include athletes, "
          "politicians and writers.",
    "p3": "Wi-Fi and Bluetooth are both wireless technologies. Bluetooth connects devices over short distances "
          "with low power; Wi-Fi provides network access at higher speeds over longer ranges.",
    "p4": "The Bluetooth SIG was founded in 1998 by Ericsson, IBM, Intel, Nokia and Toshiba.",
    "p5": "Hydrogen becomes a liquid when cooled below its boiling point of -252.87 degrees Celsius (20.28 K) "
          "at atmospheric pressure.",
    "p6": "Liquid water is densest at about 4 degrees Celsius.",
}
DL19_PAIRS = [("1037798", "p1"), ("1037798", "p2"), ("1110199", "p3"), ("1110199", "p4"), ("1129237", "p5"),
              ("1129237", "p6")]


@pytest.mark.model
@pytest.mark.ray
def test_embedded_model_same_output_with_and_without_ray(cluster, tmp_path):
    """The embedded model (llama.cpp, 1 thread on both sides): local vs 2 Ray workers give
    byte-identical qrels and details (but for the worker record), probabilities included: a
    prompt's probabilities depend neither on the worker nor on what it evaluated before."""
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in DL19_QUERIES.items()))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in DL19_PASSAGES.items()))
    (tmp_path / "p.tsv").write_text("".join(f"{q}\t{d}\n" for q, d in DL19_PAIRS))
    model = os.environ.get("JUDGEBLENDER_RAY_TEST_MODEL", "llamacpp:gemma-270m")
    base = ["judge", "-q", tmp_path / "q.tsv", "-c", tmp_path / "c.jsonl", "-p", tmp_path / "p.tsv", "-j", model,
            "--mode", "logprobs", "--threads", "1", "--no-progress", "--json"]
    # locally one model evaluates every prompt after its predecessor; under Ray each of the two
    # workers sees only some of them, after other neighbours
    cli(*base, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite", timeout=600)
    run = cli(*base, "-o", tmp_path / "ray.qrels", "--store", tmp_path / "ray.sqlite", "--ray", cluster,
              "--ray-workers", "2", timeout=600)
    assert "Ray: 2 workers" in run.stderr
    local_details = (tmp_path / "local.qrels.details.jsonl").read_text()
    ray_details = (tmp_path / "ray.qrels.details.jsonl").read_text()
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()
    assert strip_workers(ray_details) == local_details
    assert all(json.loads(line)["judges"][next(iter(json.loads(line)["judges"]))].get("probs")
               for line in local_details.splitlines())  # probabilities were compared, not only labels
    pids = {w["pid"] for w in workers_of(ray_details)}
    assert len(pids) == 2 and os.getpid() not in pids


# thomas 3, multicriteria 1, sun-two-step 2 on every pair: a three-way tie; the tie-breaker (umbrela) answers 0
PANEL_RULES = [{"contains": "Measure how well the content matches a likely intent", "output": "##final score: 0"},
               {"contains": "A person typed this query", "output": "Final score: 3"},
               {"contains": "Exactness: 1\nTopicality: 1", "output": "1"},
               {"contains": "criterion", "output": "1"},
               {"contains": "The passage below was found to be relevant", "output": "Grade: 2"},
               {"contains": "Does the passage contain an answer", "output": "Yes"}]


@pytest.mark.ray
def test_a_panel_with_a_tiebreaker_same_output_with_and_without_ray(cluster, tmp_path, tiny):
    """`judge --panel --ray`: three members of one model share its two workers (the model is
    built once per worker, not per member); the tie-breaker, another model, gets workers of its
    own; qrels and details are those of the local run."""
    for name in ("members", "big"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"name": name, "rules": PANEL_RULES}))
    panel = tmp_path / "p.toml"
    panel.write_text('[aggregator]\nmethod = "mv"\ntie = "avg"\n'
                     + "".join(f'[[judges]]\nmodel = "scripted:{tmp_path}/members.json"\nprompt = "{p}"\n'
                               for p in ("thomas", "multicriteria", "sun-two-step"))
                     + f'[tiebreaker]\nmodel = "scripted:{tmp_path}/big.json"\nprompt = "umbrela"\nid = "big"\n'
                     + 'spread = 4\n')
    base = ["judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl", "-p", tiny / "qrels.txt",
            "--panel", panel, "--no-progress", "--json"]
    local = json.loads(cli(*base, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite").stdout)
    run = cli(*base, "-o", tmp_path / "ray.qrels", "--store", tmp_path / "ray.sqlite", "--ray", cluster,
              "--ray-workers", "2")
    remote = json.loads(run.stdout)
    assert run.stderr.count("Ray: 2 workers of scripted:") == 2  # the members' model once, the tie-breaker's once
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()
    assert {line.split()[3] for line in (tmp_path / "ray.qrels").read_text().splitlines()} == {"0"}
    ray_details = (tmp_path / "ray.qrels.details.jsonl").read_text()
    assert strip_workers(ray_details) == (tmp_path / "local.qrels.details.jsonl").read_text()
    assert remote["panel"] == local["panel"] and remote["judges"][0]["calls_made"] == local["judges"][0]["calls_made"]
    pids = {w["pid"] for w in workers_of(ray_details)}
    assert len(pids) == 2 and os.getpid() not in pids
    # every member's answers came from the same two workers
    for line in ray_details.splitlines():
        for j in json.loads(line)["judges"].values():
            assert {w["pid"] for w in j["workers"]} <= pids


@pytest.mark.ray
def test_grade_with_a_jury_of_two_models_same_output_with_and_without_ray(cluster, tmp_path):
    """`grade --ray`: each model gets its own workers (the cluster split between the two), the
    graded items and the summary are those of the local run."""
    def rubric(score, reason):
        return json.dumps({"score": score, "reason": reason})

    (tmp_path / "good.json").write_text(json.dumps({"name": "good", "default": rubric(0.5, "partly"), "rules": [
        {"contains": "Paris", "output": rubric(1.0, "same city")}]}))
    (tmp_path / "harsh.json").write_text(json.dumps({"name": "harsh", "default": rubric(0.0, "no"), "rules": [
        {"contains": "Paris", "output": rubric(0.8, "right")}]}))
    items = tmp_path / "items.jsonl"
    items.write_text(
        json.dumps({"id": "paris", "input": "What is the capital of France?", "output": "Paris.", "reference": "Paris"})
        + "\n" + json.dumps({"id": "hamlet", "input": "Who wrote Hamlet?", "output": "Charles Dickens.",
                             "reference": "William Shakespeare"}) + "\n")
    base = ["grade", "--items", items, "-j", f"scripted:{tmp_path}/good.json", "-j", f"scripted:{tmp_path}/harsh.json",
            "--no-progress", "--json"]
    local = json.loads(cli(*base, "-o", tmp_path / "local.jsonl", "--store", tmp_path / "local.sqlite").stdout)
    run = cli(*base, "-o", tmp_path / "ray.jsonl", "--store", tmp_path / "ray.sqlite", "--ray", cluster,
              "--ray-workers", "2")
    assert run.stderr.count("Ray: 2 workers of scripted:") == 2
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    remote = json.loads(run.stdout)
    for summary in (local, remote):
        for m in summary["judges"]:
            m.pop("seconds")
        summary.pop("out")
    assert remote == local
    with CallStore(tmp_path / "ray.sqlite") as store:
        workers = {rec["extra"]["worker"]["pid"] for rec in store.iter_calls()}
    assert len(workers) >= 2 and os.getpid() not in workers


@pytest.mark.ray
def test_cascade_llm_judges_on_ray_cheap_scorer_on_the_driver(cluster, tmp_path):
    """`cascade --ray`: the doubtful pairs go to the LLM judge's Ray workers; the cheap scorer
    (MiniLM) runs on the driver as without Ray; the labels are the local run's."""
    queries = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
    corpus = {"g1": "Goldfish eat flakes, pellets and peas.", "g2": "Goldfish live in ponds and bowls.",
              "g3": "The goldfish is a freshwater fish.", "e1": "The Eiffel Tower is 330 metres tall.",
              "e2": "The Eiffel Tower is in Paris.", "e3": "Paris is the capital of France."}
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in corpus.items()))
    (tmp_path / "p.tsv").write_text("".join(f"{'q1' if d[0] == 'g' else 'q2'}\t{d}\n" for d in corpus))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({**SCRIPT, "default": "##final score: 0"}))  # every escalated pair gets an answer
    base = ["cascade", "-q", tmp_path / "q.tsv", "-c", tmp_path / "c.jsonl", "-p", tmp_path / "p.tsv",
            "--cheap", "embed:default", "--threshold", "0.5", "-j", f"scripted:{model}", "--budget", "4",
            "--no-progress", "--json"]
    local = json.loads(cli(*base, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite").stdout)
    run = cli(*base, "-o", tmp_path / "ray.qrels", "--store", tmp_path / "ray.sqlite", "--ray", cluster,
              "--ray-workers", "2")
    assert "Ray: 2 workers of scripted:" in run.stderr
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()
    local_details = [json.loads(line) for line in (tmp_path / "local.qrels.details.jsonl").read_text().splitlines()]
    ray_details = [json.loads(line) for line in (tmp_path / "ray.qrels.details.jsonl").read_text().splitlines()]
    workers = [w for d in ray_details for j in d.get("llm", {}).values() for w in j.pop("workers", [])]
    for d in local_details:
        for j in d.get("llm", {}).values():
            j.pop("workers", None)
    assert ray_details == local_details
    assert sum("llm" in d for d in ray_details) == 4 and workers
    assert os.getpid() not in {w["pid"] for w in workers}
    remote = json.loads(run.stdout)
    assert remote["escalated"] == local["escalated"] == 4


@pytest.fixture
def ray_client_head(tmp_path):
    """A head started with `ray start` (its own session directory, 2 CPUs, a small object store,
    no dashboard) with Ray's client server; stopped by its process group, never by `ray stop`
    (which stops every Ray runtime of this user on the machine, other people's tests included)."""
    pytest.importorskip("ray")
    import shutil
    import tempfile

    ray_cli = Path(sys.executable).with_name("ray")
    gcs_port, client_port = free_port(), free_port()
    session = tempfile.mkdtemp(prefix="jbray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = environ(RAY_AUTH_MODE="token")  # the head's workers import this checkout's judgeblender
    start = subprocess.Popen(
        [str(ray_cli), "start", "--head", f"--port={gcs_port}", f"--ray-client-server-port={client_port}",
         "--num-cpus=2", "--include-dashboard=false", f"--object-store-memory={200 * 1024**2}",
         "--node-ip-address=127.0.0.1", f"--temp-dir={session}", "--disable-usage-stats"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    group = start.pid  # the head's daemons keep the process group of `ray start`
    try:
        out, _ = start.communicate(timeout=60)
        assert start.returncode == 0, out
        yield ClientHead(f"ray://127.0.0.1:{client_port}", Path(session))
    finally:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _group_alive(group):
                time.sleep(0.2)
            if not _group_alive(group):
                break
        shutil.rmtree(session, ignore_errors=True)


class ClientHead(NamedTuple):
    address: str
    session: Path

    def client_server_logs(self) -> str:
        """What the head's client servers wrote to their error logs: the only trace of why one failed."""
        logs = sorted(self.session.glob("session_latest/logs/ray_client_server*.err"))
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for log in logs)

    def failed_server_starts(self) -> int:
        """How many clients' servers the head's client proxy failed to start (its own log says)."""
        log = self.session / "session_latest" / "logs" / "ray_client_server.err"
        return log.read_text(errors="replace").count("SpecificServer startup failed") if log.exists() else 0


def _group_alive(group: int) -> bool:
    """Is a live (not zombie) process left in this process group?"""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


@pytest.mark.ray
def test_judging_through_ray_client_on_a_head_started_with_ray_start(ray_client_head, tmp_path, tiny):
    """`--ray ray://127.0.0.1:PORT`: a driver joins a separate head through Ray's client server;
    the output is the local run's, answered by the head's workers."""
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SCRIPT))
    args = ["judge", "-q", tiny / "queries.tsv", "-c", tiny / "corpus.jsonl", "-p", tiny / "qrels.txt",
            "-j", f"scripted:{model}", "--no-progress", "--json"]
    cli(*args, "-o", tmp_path / "local.qrels", "--store", tmp_path / "local.sqlite")
    started = time.monotonic()
    try:  # a failed start of the client's server costs Ray about 40 s before it says so; 3 are allowed
        run = cli(*args, "-o", tmp_path / "ray.qrels", "--store", tmp_path / "ray.sqlite", "--ray",
                  ray_client_head.address, "--ray-workers", "2", env={"RAY_AUTH_MODE": "token"}, timeout=300)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{ray_client_head.client_server_logs()}") from None
    seconds = time.monotonic() - started
    said = [line for line in run.stderr.splitlines() if "failed to start for this driver" in line]
    # each said with its cause, then joined again: a start the proxy logged as failed, or one whose
    # server died while the proxy looked at it (psutil's traceback, which the proxy does not log)
    logged = [line for line in said if "(Starting Ray client server failed;" in line]
    assert len(logged) == ray_client_head.failed_server_starts()
    assert all("psutil." in line for line in said if line not in logged), said
    rejoins = len(said)
    assert "Ray: 2 workers of" in run.stderr
    assert (tmp_path / "ray.qrels").read_bytes() == (tmp_path / "local.qrels").read_bytes()
    ray_details = (tmp_path / "ray.qrels.details.jsonl").read_text()
    assert strip_workers(ray_details) == (tmp_path / "local.qrels.details.jsonl").read_text()
    pids = {w["pid"] for w in workers_of(ray_details)}
    assert len(pids) == 2 and os.getpid() not in pids
    assert seconds < 60 + 45 * rejoins, (seconds, rejoins)


class _FlakyClientRay:
    """Stands in for the `ray` module's init only: fails its first `failures` joins as Ray's client
    proxy does when it cannot start the client's own server (the real join is the test above)."""

    def __init__(self, failures: int, message: str):
        self.failures, self.message, self.joins = failures, message, []

    def init(self, **kwargs):
        self.joins.append(kwargs["address"])
        if len(self.joins) <= self.failures:  # as Ray 2.60 raises it
            raise ConnectionError(f"Initialization failure from server:\n{self.message}")


def test_a_ray_client_join_whose_client_server_failed_to_start_is_tried_again_and_said(capsys):
    from judgeblender.backends.ray_executor import CLIENT_JOIN_ATTEMPTS, CLIENT_SERVER_FAILED, _join

    failed = f"{CLIENT_SERVER_FAILED}. See ray_client_server_23000.err for detailed logs."
    ray = _FlakyClientRay(CLIENT_JOIN_ATTEMPTS - 1, failed)
    _join(ray, "ray://127.0.0.1:10001")
    assert ray.joins == ["ray://127.0.0.1:10001"] * CLIENT_JOIN_ATTEMPTS
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == CLIENT_JOIN_ATTEMPTS - 1
    assert all("failed to start for this driver" in w and "joining again" in w for w in warnings)

    always = _FlakyClientRay(CLIENT_JOIN_ATTEMPTS, failed)  # every attempt fails: the error is Ray's
    with pytest.raises(ConnectionError, match=CLIENT_SERVER_FAILED):
        _join(always, "ray://127.0.0.1:10001")
    assert len(always.joins) == CLIENT_JOIN_ATTEMPTS

    other = _FlakyClientRay(1, "some other failure")  # not the client server's start: no retry
    with pytest.raises(ConnectionError, match="some other failure"):
        _join(other, "ray://127.0.0.1:10001")
    died = ("Traceback (most recent call last):\n  File \"proxier.py\", line 765, in Datapath\n"
            "  File \"proxier.py\", line 396, in start_specific_server\n    cmd = psutil_proc.cmdline()\n"
            "psutil.ZombieProcess: PID still exists but it's a zombie (pid=31399)\n")
    zombie = _FlakyClientRay(1, died)  # the server died while the proxy looked at it: as in CI once
    _join(zombie, "ray://127.0.0.1:10001")
    assert len(zombie.joins) == 2
    said = capsys.readouterr().err
    assert "(psutil.ZombieProcess: PID still exists but it's a zombie (pid=31399); attempt 1 of 3)" in said

    gcs = _FlakyClientRay(1, failed)  # a GCS address has no client server to retry
    with pytest.raises(ConnectionError):
        _join(gcs, "127.0.0.1:6379")
    assert len(other.joins) == len(gcs.joins) == 1
