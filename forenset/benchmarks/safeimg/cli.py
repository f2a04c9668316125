"""The SafeIMG family's command (mounted at top level): safeimg."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from forenset.benchmarks.common.cli import built_store, echo_fail

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="SafeIMG: the benchmark sets and Tables 2-3."
)


@app.command("safeimg")
def safeimg_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory (local).")],
    simulate: Annotated[
        bool,
        typer.Option("--simulate", help="Demo only: add simulated annotations (labelled so)."),
    ] = False,
    per_category: Annotated[int, typer.Option(help="D_real images per category.")] = 50,
    real_categories: Annotated[
        Path | None, typer.Option(help="CSV image_id,category for the real images.")
    ] = None,
    judge: Annotated[
        Path | None,
        typer.Option(help="YAML of an llm: pool (LLMSettings) for the alignment judge."),
    ] = None,
    resamples: Annotated[
        int, typer.Option(min=0, help="Bootstrap resamples behind each interval (0: none).")
    ] = 1000,
    min_n: Annotated[
        int, typer.Option(min=1, help="Fewer items: the number is marked not meaningful.")
    ] = 10,
) -> None:
    """SafeIMG: build D_ann / D_hard / excluded / D_real and print Tables 2-3 from detections,
    each number with n and a seeded 95% bootstrap interval."""
    import yaml

    from forenset.benchmarks.safeimg.sets import format_tables, run_safeimg, simulate_annotations
    from forenset.exports.api import build_seed

    store = built_store(run_dir)
    seed = build_seed(store)
    j = None
    if judge is not None:
        from pydantic import ValidationError

        from forenset.backends.llm.cache import ResponseCache
        from forenset.backends.llm.types import LLMSettings
        from forenset.benchmarks.safeimg.scorers import ModelAlignmentJudge
        from forenset.paths import read_text_file
        from forenset.strict import load_yaml

        try:
            settings = LLMSettings.model_validate(load_yaml(read_text_file(judge, 1 << 24)))
        except (OSError, yaml.YAMLError, ValidationError) as e:
            echo_fail(f"--judge {judge} is not a usable llm pool YAML ({str(e).splitlines()[0]})")
        j = ModelAlignmentJudge(
            settings, build_seed=seed, cache=ResponseCache(store.fs, store.root)
        )
    if simulate:
        typer.echo(f"simulated triage: {json.dumps(simulate_annotations(store, seed))}")
    from forenset.benchmarks.common.scoring.intervals import IntervalsConfig

    res = run_safeimg(
        store, per_category=per_category, seed=seed, real_categories=real_categories, judge=j,
        intervals=IntervalsConfig(resamples=resamples, min_n=min_n),
    )  # fmt: skip
    if not res["counts"]["D_SafeIMG"] and not res["excluded_reasons"]:
        echo_fail("the run has no text-to-image candidates (add a t2i generator)")
    typer.echo(format_tables(res))
    typer.echo(f"tables and scores.json: {res['path']}")
