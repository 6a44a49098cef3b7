"""`judgeblender data fetch NAME`: the example data (`jb.load_dataset`) from the command line."""

from __future__ import annotations

from dataclasses import fields

import typer

from ..datasets import load_dataset

data_app = typer.Typer(help="Example data built from its public sources (data/manifest.toml).", no_args_is_help=True)


@data_app.command("fetch")
def fetch_command(
    name: str = typer.Argument("dl19", help="The bundle: dl19 (TREC DL 2019 passages, runs, LLM labels)."),
) -> None:
    """Download, check and convert a bundle once into the cache (or find it in JUDGEBLENDER_DATA),
    then print where each of its files is."""
    bundle = load_dataset(name)
    for field in fields(bundle):
        if field.name != "name":
            typer.echo(f"{field.name}\t{getattr(bundle, field.name)}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
