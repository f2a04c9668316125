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
            try:
                done = label_studio_tasks(store, label_studio)
            except ValueError as e:
                fail(str(e))
            console.print(f"label studio: {done['tasks']} tasks in {label_studio}")
        if hf is not None:
            done = export_reward_hf(store, hf)
            console.print(f"hf dataset: {done['triplets']} triplets in {hf}")


def _fmt(x) -> str:
    from forenset.benchmarks.reward.release import Number

    assert isinstance(x, Number)
    ci = "" if x.ci is None else f" [{x.ci[0]:.3f}, {x.ci[1]:.3f}]"
    return f"{x.value:.3f}{ci}"


@app.command("reward-release")
def reward_release(
    folder: Annotated[Path, typer.Argument(help="A XAIGID-RewardBench release folder (or data/).")],
    annotations: Annotated[
        str, typer.Option(help="The annotations file under data/annotations/.")
    ] = "benchmark_annotations.json",
    include_neutral: Annotated[
        bool, typer.Option("--include-neutral", help="Elo: tie and both_bad count 0.5.")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json-out", help="Write the tables.")] = None,
) -> None:
    """Policy accuracy, Elo and agreement of a release folder, by the release's own analysis
    rules (docs/reward.md), each number with n and a 95 % bootstrap interval."""
    import dataclasses
    import json

    from forenset.benchmarks.reward.release import load_release, read_release, release_tables

    if not folder.is_dir():
        fail(f"{folder} is not a folder")
    rel = load_release(folder, annotations)
    for e in rel.errors:
        console.print(f"error: {e['id']}: {e['error']}", markup=False)
    if not rel.responses and not rel.records:
        fail(f"{folder} holds no release data (data/model_outputs, data/annotations)")
    t = release_tables(rel, include_neutral=include_neutral)
    acc = Table(
        title="Policy accuracy (release rules: an unparsed answer is wrong), [95 % interval]"
    )
    for col in ("model", "synthetic", "real", "overall", "n"):
        acc.add_column(col, justify="left" if col == "model" else "right")
    for m, s in t["policy_accuracy"].items():
        acc.add_row(m, *(_fmt(s[k]) if k in s else "" for k in ("synthetic", "real", "overall")),
                    str(s["overall"].n))  # fmt: skip
    console.print(acc)
    elo = Table(title="Elo (every annotation a game, K 32, start 1200), [95 % interval]")
    for col in ("rank", "model", "elo", "games", "wins", "losses", "neutral", "win rate"):
        elo.add_column(col, justify="left" if col == "model" else "right")
    for r in t["elo"]:
        elo.add_row(str(r.rank), r.model, _fmt(r.elo).replace(".000", ".0", 1), str(r.games),
                    str(r.wins), str(r.losses), str(r.neutral), f"{r.win_rate_non_neutral:.3f}")  # fmt: skip
    console.print(elo)
    for k in ("agreement_all_choices", "agreement_response_only"):
        a = t[k]
        console.print(f"{k}: pairwise {a['pairwise_rate']:.3f} over {a['pairs']} pairs, "
                      f"unanimous {a['unanimous_rate']:.3f} over {a['records']} records",
                      markup=False)  # fmt: skip
    rows = read_release(rel)
    counts = {k: sum(r.get("status") == "ok" for r in v) for k, v in rows.items()}
    console.print(f"read as: {counts}", markup=False)
    if json_out is not None:

        def plain(x):
            if dataclasses.is_dataclass(x) and not isinstance(x, type):
                return dataclasses.asdict(x)
            raise TypeError(type(x).__name__)

        json_out.write_text(json.dumps(t, default=plain, indent=1))


@app.command("reward-export-release")
def reward_export_release(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    out: Annotated[Path, typer.Argument(help="Folder to write the release's data/ into.")],
) -> None:
    """The run's reward build in XAIGID-RewardBench's release shape (model_outputs, triplets,
    annotations), readable by the release's own analysis scripts."""
    from forenset.benchmarks.reward.exports import export_release

    store = open_run(run_dir)
    if not store.manifest("reward_triplets"):
        fail(f"{run_dir} has no reward_triplets: build it with reward.enabled")

    def ok(stage: str) -> list[dict]:
        got: list[dict] = []
        for info in store.manifest(stage):
            got.extend(r for r in store.read_shard(info).to_pylist() if r.get("status") == "ok")
        return got

    done = export_release(ok("reward_responses"), ok("reward_triplets"), ok("reward_labels"), out)
    console.print(f"release: {done}", markup=False)
