"""`judgeblender prompts list | show NAME | render NAME`: the prompt library."""

from __future__ import annotations

import typer
from rich.table import Table

from ..prompts import get_template, license_text, list_templates
from ..prompts.template import BASE_VARIABLES
from .console import console

prompts_app = typer.Typer(help="The prompt library: list, show and render judge prompts.", no_args_is_help=True)


@prompts_app.command("list")
def list_() -> None:
    """List the available prompt templates."""
    table = Table(show_edge=False)
    for col in ("name", "steps", "logprobs", "license", "title"):
        table.add_column(col)
    for t in list_templates():
        table.add_row(t.name, str(len(t.steps)), "yes" if t.supports_logprobs else "no", t.license, t.title)
    console.print(table)


@prompts_app.command()
def show(name: str, license: bool = typer.Option(False, "--license", help="Print the license notice too.")) -> None:
    """Show a template's metadata and every step's text."""
    t = get_template(name)
    console.print(f"name: {t.name}\ntitle: {t.title}\ndescription: {t.description}\nscale: {t.scale}\n"
                  f"citation: {t.citation}\nlicense: {t.license}\nsource: {t.source}\nfile: {t.path}")
    for step in t.steps:
        console.print(f"\n--- step {step.id} (output: {step.output}"
                      + (f", labels: {step.labels}" if step.labels else "")
                      + (f", stop: {step.stop}" if step.stop else "")
                      + (f", answer prefix: {step.answer_prefix!r}" if step.answer_prefix else "") + ") ---")
        if step.system:
            console.print("[system]\n" + step.system, markup=False)
        console.print("[user]\n" + step.user, markup=False)
    if license:
        text = license_text(t)
        console.print("\n" + (text or "no license file"), markup=False)


@prompts_app.command()
def render(
    name: str,
    query: str = typer.Option(..., "--query"),
    passage: str = typer.Option(..., "--passage"),
    step: str = typer.Option(None, "--step", help="Render this step (default: the first)."),
    var: list[str] = typer.Option([], "--var", help="NAME=VALUE for other placeholders, e.g. an earlier step's output."),
) -> None:
    """Render a template's step with a query and passage, exactly as the model would see it."""
    t = get_template(name)
    chosen = next((s for s in t.steps if s.id == step), None) if step else t.steps[0]
    if chosen is None:
        raise typer.BadParameter(f"no step {step!r}; steps: {', '.join(s.id for s in t.steps)}")
    values = {BASE_VARIABLES[0]: query, BASE_VARIABLES[1]: passage}
    for item in var:
        key, _, value = item.partition("=")
        values[key] = value
    system, user = t.render_step(chosen, values)
    if system:
        console.print("[system]\n" + system + "\n\n[user]", markup=False)
    console.print(user, markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(prompts_app, name="prompts")
