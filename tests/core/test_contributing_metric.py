"""CONTRIBUTING's "Adding a metric" recipe, executed as written: the module block becomes a
module of the evaluation family's scorers package (in a temporary folder on its package path)
and the line is added to the family's metrics where the recipe puts it (through the scoring
registry's view of them, ``registry.BUILTIN``); the new metric must then
be scored in the long table and shown by the pivot the CLI and report use."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import forenset.benchmarks.evaluation.scorers as eval_scorers
from forenset.benchmarks.common import scoring
from forenset.benchmarks.common.scoring import registry

ROOT = Path(__file__).resolve().parents[2]
MODULE = "forenset.benchmarks.evaluation.scorers.explanation_words"


def recipe() -> dict[str, str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    part = text[text.index("## Adding a metric") :]
    part = part[: part.index("\n## ", 3)]
    blocks = re.findall(r"```python\n(.*?)```", part, re.S)
    out = {}
    for body in blocks:
        if "ItemMean(" in body and "scope=" in body:
            out["reward_module"] = body
        elif "ItemMean(" in body:
            out["module"] = body
        elif "evaluation/__init__.py" in body:
            out["registry"] = body
        elif "reward/__init__.py" in body:
            out["reward_registry"] = body
    assert set(out) == {"module", "registry", "reward_module", "reward_registry"}, sorted(out)
    return out


@pytest.fixture
def words_metric(tmp_path, monkeypatch):
    r = recipe()
    folder = tmp_path / "scorers"
    folder.mkdir()
    (folder / "explanation_words.py").write_text(r["module"])
    monkeypatch.setattr(eval_scorers, "__path__", [*eval_scorers.__path__, str(folder)])
    name, target = re.search(r'"(explanation_words)": "([\w.:]+)"', r["registry"]).groups()
    after = re.search(r'"(\w+)": "[\w.:]+",\n\s+"explanation_words"', r["registry"]).group(1)
    family = {}
    for k, v in registry.BUILTIN["evaluation"].items():
        family[k] = v
        if k == after:
            family[name] = target
    monkeypatch.setitem(registry.BUILTIN, "evaluation", family)
    yield name
    sys.modules.pop(MODULE, None)
    registry._load.cache_clear()


def test_the_recipe_metric_is_scored_and_pivoted(words_metric):
    names = scoring.metric_names("evaluation")
    assert names.index(words_metric) == names.index("sle") + 1
    items = [
        {"label": "fake", "answer": "fake", "explanation": "warped hands and odd text"},
        {"label": "real", "answer": "real", "explanation": "consistent light"},
        {"label": "real", "answer": "fake", "explanation": None},
    ]
    rows = scoring.score_rows(
        {"detector": "d", "track": "complex"}, "d/complex", items, scoring.scorers("evaluation"),
        scoring.IntervalsConfig(min_n=1), seed=0,
    )  # fmt: skip
    (w,) = [r for r in rows if r["metric"] == words_metric]
    assert w["value"] == pytest.approx((5 + 2 + 0) / 3) and w["n"] == 3
    assert w["ci_low"] <= w["value"] <= w["ci_high"]
    p = scoring.pivot(rows, ["detector", "track"], scoring.scorers("evaluation"))
    assert p.headers[-1] == "words"
    assert p.rows[0][-1].startswith(f"{w['value']:.3f} [")


def test_the_recipe_metric_reaches_the_stage_cli_and_report(words_metric, tmp_path):
    """Built by eval_scores (no stage change), printed by ``forenset eval`` and the report."""
    from typer.testing import CliRunner

    from forenset.benchmarks.evaluation.report import evaluation_section
    from forenset.cli import app
    from forenset.store.views import connect
    from tests.stages.test_eval_scores import ITEMS, run_stage

    store, _, _, out = run_stage(tmp_path)
    a = out["d1/complex/id/all=all"]
    texts = [cx for es, *_x, cx, _sx in ITEMS if es == "id"]
    want = sum(len((t or "").split()) for t in texts) / len(texts)
    assert a[words_metric] == pytest.approx(want) and a[f"{words_metric}_n"] == len(texts)
    assert a[f"{words_metric}_ci_low"] <= a[words_metric] <= a[f"{words_metric}_ci_high"]
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    header = next(ln for ln in res.output.splitlines() if "detector" in ln)
    assert header.rstrip(" ┃|").endswith("words")
    row = next(ln for ln in res.output.splitlines() if "complex" in ln and " ID " in ln)
    assert f"{a[words_metric]:.3f} [" in row
    section = evaluation_section(store, connect(store, ["eval_scores"]))
    assert "<th>words</th>" in section


REWARD_MODULE = "forenset.benchmarks.reward.scorers.no_verdict"


@pytest.fixture
def no_verdict_metric(tmp_path, monkeypatch):
    """The reward recipe's module and registry line, placed as CONTRIBUTING says."""
    import forenset.benchmarks.reward.scorers as reward_scorers

    r = recipe()
    folder = tmp_path / "reward_scorers"
    folder.mkdir()
    (folder / "no_verdict.py").write_text(r["reward_module"])
    monkeypatch.setattr(reward_scorers, "__path__", [*reward_scorers.__path__, str(folder)])
    name, target = re.search(r'"(no_verdict)": "([\w.:]+)"', r["reward_registry"]).groups()
    after = re.search(r'"(\w+)": "[\w.:]+",\n\s+"no_verdict"', r["reward_registry"]).group(1)
    family = {}
    for k, v in registry.BUILTIN["reward"].items():
        family[k] = v
        if k == after:
            family[name] = target
    monkeypatch.setitem(registry.BUILTIN, "reward", family)
    yield name
    sys.modules.pop(REWARD_MODULE, None)
    registry._load.cache_clear()


def test_the_reward_recipe_metric_is_scored_by_the_stage_and_shown_by_the_tables(
    no_verdict_metric,
):
    """reward_scores (no stage change) scores it on every policy_accuracy group, and the
    tables that ``forenset reward`` and the report print show it as a column."""
    from types import SimpleNamespace

    import duckdb
    import pyarrow as pa

    from forenset.benchmarks.reward.config import RewardConfig
    from forenset.benchmarks.reward.report import reward_tables
    from forenset.benchmarks.reward.stages.reward_scores import RewardScores
    from forenset.tasks.base import StageContext

    answers = [("real", "real"), ("real", None), ("fake", "fake"), ("fake", "real")]
    batch = pa.Table.from_pylist(
        [
            {"input": "reward_responses", "response_id": f"r{i}", "policy": "p",
             "generator": "g" if lab == "fake" else "real", "label": lab, "verdict": v}
            for i, (lab, v) in enumerate(answers)
        ]
    )  # fmt: skip
    cfg = SimpleNamespace(reward=RewardConfig(intervals={"min_n": 1}), seed=3)
    stage = RewardScores(StageContext(None, cfg))  # type: ignore[arg-type]
    rows = stage.process(batch).to_pylist()
    got = {(r["group"], r["metric"]): r for r in rows}
    assert got[("overall", no_verdict_metric)]["value"] == 0.25
    assert got[("real", no_verdict_metric)]["value"] == 0.5
    assert got[("fake", no_verdict_metric)]["value"] == 0.0
    assert got[("overall", "accuracy")]["value"] == 0.5  # the built-ins are scored as before
    con = duckdb.connect()
    con.register("reward_scores", pa.Table.from_pylist(rows))
    con.execute(
        "CREATE TABLE reward_labels AS SELECT 't' AS triplet_id, 'ok' AS status, "
        "false AS tied, 'First' AS label"
    )
    (t12,) = [t for t in reward_tables(con).tables if t.title.startswith("Tables 1-2")]
    assert "no verdict overall" in t12.headers and "acc overall" in t12.headers
    assert t12.rows[0][t12.headers.index("no verdict overall")].startswith("25.00")
