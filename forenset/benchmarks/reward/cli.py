"""The reward family's command (mounted at top level): reward."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from forenset.benchmarks.common.cli import console, fail, open_run

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="The reward benchmark (XAIGID-RewardBench)."
)


@app.command("reward")
def reward(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    label_studio: Annotated[
        Path | None, typer.Option(help="Also write the Label Studio triplet task here.")
    ] = None,
    hf: Annotated[
        Path | None, typer.Option(help="Also write the triplets + labels as an HF dataset here.")
    ] = None,
) -> None:
    """The reward benchmark (XAIGID-RewardBench): policy accuracy (Tables 1-2), policy Elo
    (Tables 3/5), judges' Acc(4)/Acc(2) (Table 4), agreement and tied triplets."""
    store = open_run(run_dir)
    if not store.manifest("reward_scores"):
        fail(f"{run_dir} has no reward_scores: build it with reward.enabled")
    from forenset.benchmarks.reward.report import reward_tables
    from forenset.store.views import connect

    got = reward_tables(connect(store, ["reward_scores", "reward_labels"]))
    for t in got.tables:
        table = Table(title=t.title)
        for i, col in enumerate(t.headers):
            table.add_column(col, justify="left" if i < 2 else "right")
        for row in t.rows:
            table.add_row(*row)
        console.print(table)
    for note in got.notes:
        console.print(note)
    if got.ties:
        console.print(
            f"{len(got.ties)} tied triplet(s) to resolve (reward.labels.resolutions): "
            + ", ".join(got.ties)
        )
    if label_studio is not None or hf is not None:
        from forenset.benchmarks.reward.exports import export_reward_hf, label_studio_tasks

        if label_studio is not None:
            done = label_studio_tasks(store, label_studio)
            console.print(f"label studio: {done['tasks']} tasks in {label_studio}")
        if hf is not None:
            done = export_reward_hf(store, hf)
            console.print(f"hf dataset: {done['triplets']} triplets in {hf}")
