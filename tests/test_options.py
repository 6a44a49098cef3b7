"""Backend options are declared once per provider (a pydantic model) and checked the same way
for LLM backends and scorer judges, from the API, panel files and the CLI."""

from __future__ import annotations

import pytest

import judgeblender as jb
from judgeblender.backends import registry
from judgeblender.backends.registry import (BackendOptions, Provider, check_options, command_options, create_backend,
                                            is_scorer)
from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.errors import InputError, JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, build_judge


def test_a_misspelt_option_is_an_error_naming_the_judge_and_the_nearest_option():
    with pytest.raises(JudgeblenderError) as err:
        Judge(JudgeSpec("openai:x", options={"concurreny": 4}))
    assert "judge openai:x: unknown option 'concurreny' (did you mean 'concurrency'?)" in str(err.value)


def test_the_judge_is_named_by_its_id_when_it_has_one():
    with pytest.raises(JudgeblenderError, match="judge fast: unknown option 'n_thread' .did you mean 'n_threads'"):
        Judge(JudgeSpec("llamacpp:default", id="fast", options={"n_thread": 2}))


def test_a_bad_value_is_an_error_naming_the_judge_the_option_and_the_value():
    with pytest.raises(JudgeblenderError, match=r"judge openai:x: option 'concurrency': .*greater than or equal to 1 .got 0"):
        create_backend("openai:x", concurrency=0)
    with pytest.raises(JudgeblenderError, match="option 'space_path'"):
        check_options("llamacpp:default", {"space_path": "diagonal"})


def test_values_are_coerced_to_the_declared_types():
    assert check_options("openai:x", {"concurrency": "3", "timeout_s": "1.5"}).concurrency == 3


def test_command_wide_flags_reach_only_the_judges_whose_provider_declares_them():
    shared = {"n_threads": 2, "base_url": "http://h", "concurrency": 2, "concurreny": 3}
    kept = command_options("scripted:x.json", shared)
    assert kept == {"concurrency": 2, "concurreny": 3}  # a misspelt key stays, to be refused
    with pytest.raises(JudgeblenderError, match="unknown option 'concurreny'"):
        check_options("scripted:x.json", kept)


def test_a_judges_own_option_its_provider_does_not_declare_is_an_error():
    with pytest.raises(JudgeblenderError, match="judge llamacpp:default: unknown option 'concurrency'"):
        check_options("llamacpp:default", {"concurrency": 4})
    with pytest.raises(JudgeblenderError, match="unknown option 'base_url'"):
        check_options("scripted:x.json", {"base_url": "http://h"})


def test_scorer_judges_check_their_options_through_the_same_registry():
    assert is_scorer("embed:default") and is_scorer("cross:/m") and not is_scorer("openai:x")
    with pytest.raises(JudgeblenderError, match="judge embed:default: unknown option 'treshold' .did you mean 'threshold'"):
        build_judge(JudgeSpec("embed:default", options={"treshold": 0.3}))


def test_a_registered_provider_declares_its_options_and_builds_a_backend():
    class Options(BackendOptions):
        answer: str = "2"

    registry.register("canned", Provider("canned", Options, lambda model, o: ScriptedBackend(default=o.answer)))
    try:
        assert create_backend("canned:m", answer="3").default == "3"
        with pytest.raises(JudgeblenderError, match="unknown option 'anser' .did you mean 'answer'"):
            create_backend("canned:m", anser="3")
    finally:
        registry.unregister("canned")


def test_the_notebook_api_checks_options_before_judging():
    with pytest.raises(JudgeblenderError, match="did you mean 'concurrency'"):
        jb.judge([("q1", "d1")], ["openai:x"], queries={"q1": "q"}, corpus={"d1": "p"},
                 options={"concurreny": 4})


def test_a_panel_file_option_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[judges]]\nmodel = "openai:x"\noptions = { concurreny = 4 }\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"p.toml:3: .*did you mean 'concurrency'"):
        jb.panel(path)
