"""Prompt templates: the built-in library, users' own files, and clear errors."""

import pytest

from judgeblender.errors import TemplateError
from judgeblender.prompts import get_template, license_text, list_templates, load_template


def test_builtin_library_has_the_published_methods():
    names = {t.name for t in list_templates()}
    assert {"umbrela", "umbrela-basic", "thomas", "faggioli", "multicriteria", "sun-two-step", "relexp"} <= names


def test_umbrela_ships_verbatim_with_its_license(tmp_path):
    t = get_template("umbrela")
    assert t.license == "Apache-2.0"
    assert "Provide each score in the format of: ##final score: score without providing any reasoning." in t.steps[0].user
    assert "Apache License" in license_text(t)


def test_multi_step_judges_are_real_steps():
    mc = get_template("multicriteria")
    assert [s.id for s in mc.steps] == ["exactness", "topicality", "coverage", "contextual_fit", "relevance"]
    assert "{exactness}" in mc.steps[-1].user
    sun = get_template("sun-two-step")
    assert sun.steps[0].output == "yesno" and sun.steps[0].stop == {"no": 0}
    assert sun.steps[1].labels == [1, 2, 3]
    assert get_template("relexp").steps[0].output == "text"


def test_explanation_first_prompt_cannot_use_logprobs():
    assert not get_template("umbrela-basic").supports_logprobs
    assert get_template("umbrela").supports_logprobs


def test_render_fills_query_passage_and_literal_braces(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\n[[steps]]\nid = "grade"\nuser = "Q={query} P={passage} {{json}}"\n')
    t = load_template(path)
    assert t.render_step(t.steps[0], {"query": "a", "passage": "b"}) == (None, "Q=a P=b {json}")


def test_unknown_placeholder_is_an_error_naming_it(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\n[[steps]]\nid = "grade"\nuser = "{query} {pasage}"\n')
    with pytest.raises(TemplateError, match=r"bad.toml: .*unknown placeholder \{pasage\}"):
        load_template(path)


def test_referencing_a_later_step_is_an_error(tmp_path):
    path = tmp_path / "order.toml"
    path.write_text('name = "o"\n[[steps]]\nid = "a"\nuser = "{b}"\n[[steps]]\nid = "b"\nuser = "{query}"\n')
    with pytest.raises(TemplateError, match="later step"):
        load_template(path)


def test_missing_variable_at_render_time(tmp_path):
    t = get_template("umbrela")
    with pytest.raises(TemplateError, match=r"no value for placeholder \{passage\}"):
        t.render_step(t.steps[0], {"query": "q"})


def test_bad_toml_names_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(TemplateError, match="broken.toml: not valid TOML"):
        load_template(path)


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(TemplateError, match="available: .*umbrela"):
        get_template("nope")


def test_user_prompt_folder_from_environment(tmp_path, monkeypatch):
    (tmp_path / "house.toml").write_text('name = "house"\n[[steps]]\nid = "g"\nuser = "{query}/{passage}"\n')
    monkeypatch.setenv("JUDGEBLENDER_PROMPTS", str(tmp_path))
    assert get_template("house").name == "house"
