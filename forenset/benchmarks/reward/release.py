"""XAIGID-RewardBench's release format, both ways (GitHub ``RewardBench/XAIGD-RewardBench``).

Facts of the release, read from its ``data/metadata/schema.json`` and ``code/`` (its code is not
used here):

* ``data/model_outputs/FI<model>.json`` (synthetic images) and ``RI<model>.json`` (real ones):
  lists of policy responses ``{image_id, image_type, answer[, hf_annotation_id]}``; the model's
  name is the file name without ``FI`` / ``RI`` and ``.json``;
* ``data/triplets/*.json``: lists of triplets ``{triplet_id, image_id, image_type, caption_1,
  caption_2, csv1, csv2, ...}`` (``caption_k`` the k-th response shown, ``csvk`` its policy file);
* ``data/annotations/*.json``: an object keyed by record id, each a triplet with
  ``annotations: {annotator_NNN: {choice}}``, the choice one of ``response_1_better``,
  ``response_2_better``, ``tie``, ``both_bad`` (``data_utils.normalize_choice`` also reads
  ``caption_k_better``, ``response_k`` and ``both_good`` = tie).

Its analysis conventions (``code/analyze_*.py``, ``code/calculate_elo.py``), which
:func:`release_tables` follows:

* **policy accuracy**: the verdict is the first word of the answer after markdown marks
  (``real`` / ``fake``); an answer without one is *wrong* (accuracy = correct / all rows, not
  / parsed); per model: the FI slice (expected fake), the RI slice (expected real), overall;
* **Elo**: every annotation is a game (no majority vote), records in sorted key order,
  annotations in file order, start 1200, K 32, response 1 better = 1, response 2 better = 0;
  tie and both_bad are skipped (``--include-neutral``: both 0.5); ranked by rating, then name;
  the win rate is wins / (wins + losses);
* **agreement**: over records with two or more annotations, the share of matching annotator
  pairs and of unanimous records, on all choices and on response-only choices.

:func:`read_release` reads such a folder as rows of ``reward_responses``, ``reward_triplets``
and ``reward_labels`` (labels by forenset's majority rule, ties listed; ``source`` human), and
:func:`stage_rows` gives them to the reward stages (``reward.release``: the release as a build's
input); ``reward.exports.export_release`` writes a run's reward build in the release's shape.
Records that cannot be used are error rows with the reason, never dropped silently. The format
only (no store, no export): the stages read it, so it sits with the scorers' layer.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from forenset.benchmarks.common.scoring.intervals import IntervalsConfig, row_seed, units_bootstrap
from forenset.benchmarks.reward.scorers.metrics import K_DEFAULT, START, majority
from forenset.errors import InputRefused
from forenset.paths import json_loads, read_local, under

CHOICES = {
    "response_1_better": "response_1_better",
    "response_2_better": "response_2_better",
    "caption_1_better": "response_1_better",
    "caption_2_better": "response_2_better",
    "response_1": "response_1_better",
    "response_2": "response_2_better",
    "tie": "tie",
    "both_good": "tie",
    "both_bad": "both_bad",
}
TO_LABEL = {"response_1_better": "First", "response_2_better": "Second", "tie": "Tie",
            "both_bad": "BothBad"}  # fmt: skip
FROM_LABEL = {v: k for k, v in TO_LABEL.items()}
CLEAR = ("response_1_better", "response_2_better")
PREFIX = {"fake": "FI", "real": "RI"}
IMAGE_TYPE = {"fake": "synthetic", "real": "real"}
_VERDICT = re.compile(r"^\s*[#>*_`~\-\s\"']*(real|fake)\b", re.IGNORECASE)
MAX_BYTES = 256 * 1024 * 1024


def normalize_choice(value: Any) -> str | None:
    return CHOICES.get(str(value or "").strip().lower())


def model_name(value: Any) -> str:
    name = str(value or "").replace(".json", "")
    return name[2:] if name[:2] in {"FI", "RI"} else name


def parse_verdict(answer: Any) -> str | None:
    """The release's verdict: the first word after markdown marks, real or fake."""
    if not isinstance(answer, str):
        return None
    m = _VERDICT.match(answer)
    return m.group(1).lower() if m else None


def _read(path: Path) -> Any:
    """A release file's JSON, read under the read policy (a regular file inside the release
    folder, capped: :mod:`forenset.paths`); ValueError with one sentence otherwise."""
    try:
        inside = under(str(path.parent), path.name)
        return json_loads(read_local(inside or str(path), MAX_BYTES), path.name)
    except InputRefused as e:
        raise ValueError(f"{path.name} is refused: {e.reason}") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None


def _data_dir(folder: Path) -> Path:
    return folder / "data" if (folder / "data" / "model_outputs").is_dir() else folder


@dataclass
class Release:
    """A release folder read: the policy responses per file, annotation records, and the
    error rows of everything that could not be used."""

    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # FI/RI file name
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # annotation record id
    errors: list[dict[str, Any]] = field(default_factory=list)


def _error(where: str, table: str, reason: str) -> dict[str, Any]:
    return {"id": where, "table": table, "status": "error", "error": reason[:500]}


def load_release(folder: Path, annotations: str = "benchmark_annotations.json") -> Release:
    """The policy response files and one annotations file of a release folder (its root or
    its ``data/``). A file that is not the release's shape is one error row; so is a record."""
    d = _data_dir(Path(folder))
    rel = Release()
    outs = d / "model_outputs"
    for p in sorted(outs.glob("*.json")) if outs.is_dir() else []:
        if not p.name.startswith(("FI", "RI")):
            continue
        try:
            rows = _read(p)
        except ValueError as e:
            rel.errors.append(_error(f"model_outputs/{p.name}", "reward_responses", str(e)))
            continue
        if not isinstance(rows, list):
            rel.errors.append(_error(f"model_outputs/{p.name}", "reward_responses",
                                     f"{p.name} holds a JSON {type(rows).__name__}, not a list"))  # fmt: skip
            continue
        rel.responses[p.name] = rows
    if not rel.responses:
        rel.errors.append(_error("model_outputs", "reward_responses",
                                 f"no FI*/RI*.json policy response files in {outs}"))  # fmt: skip
    ap = d / "annotations" / annotations
    try:
        data = _read(ap)
        if not isinstance(data, dict):
            raise ValueError(f"{ap.name} holds a JSON {type(data).__name__}, not an object")
        rel.records = {str(k): v for k, v in data.items()}
    except ValueError as e:
        rel.errors.append(_error(f"annotations/{annotations}", "reward_labels", str(e)))
    return rel


def read_release(rel: Release) -> dict[str, list[dict[str, Any]]]:
    """The release as rows of ``reward_responses``, ``reward_triplets`` and ``reward_labels``
    (ok rows and error rows with the reason)."""
    out: dict[str, list[dict[str, Any]]] = {"reward_responses": [], "reward_triplets": [],
                                             "reward_labels": []}  # fmt: skip
    for fname, rows in rel.responses.items():
        policy, label = model_name(fname), "fake" if fname.startswith("FI") else "real"
        for n, r in enumerate(rows):
            iid = r.get("image_id") if isinstance(r, dict) else None
            if not isinstance(iid, str) or not iid or not isinstance(r.get("answer"), str):
                out["reward_responses"].append(_error(f"{fname}#{n}", "reward_responses",
                    f"{fname} record {n} has no image_id or no text answer"))  # fmt: skip
                continue
            verdict = parse_verdict(r["answer"])
            out["reward_responses"].append({
                "response_id": f"{policy}/{iid}", "policy": policy, "policy_kind": "file",
                "reward_image_id": iid, "image_id": iid, "label": label, "verdict": verdict,
                "correct": verdict == label, "reply": r["answer"],
                "parse_error": None if verdict else "the answer does not start with real or fake",
                "status": "ok",
            })  # fmt: skip
    for key in sorted(rel.records):
        rec = rel.records[key]
        if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) and rec.get(k)
                                                for k in ("image_id", "csv1", "csv2")):  # fmt: skip
            out["reward_triplets"].append(_error(key, "reward_triplets",
                f"annotation record {key[:200]} lacks image_id, csv1 or csv2"))  # fmt: skip
            continue
        tid = str(rec.get("triplet_id") or key)
        first, second = model_name(rec["csv1"]), model_name(rec["csv2"])
        label = (
            "fake"
            if str(rec["csv1"]).startswith("FI") or rec.get("image_type") == "synthetic"
            else "real"
        )
        out["reward_triplets"].append({
            "triplet_id": tid, "reward_image_id": rec["image_id"], "image_id": rec["image_id"],
            "label": label, "pair": "|".join(sorted((first, second))), "first_policy": first,
            "second_policy": second, "first_response_id": f"{first}/{rec['image_id']}",
            "second_response_id": f"{second}/{rec['image_id']}",
            "first_reply": rec.get("caption_1"), "second_reply": rec.get("caption_2"),
            "swapped": first > second, "status": "ok",
        })  # fmt: skip
        anns: list[dict[str, Any]] = []
        bad: list[dict[str, Any]] = []
        raw = rec.get("annotations") or {}
        for who, a in raw.items() if isinstance(raw, dict) else []:
            c = normalize_choice(a.get("choice") if isinstance(a, dict) else None)
            (anns if c else bad).append({"annotator": who, "choice": TO_LABEL[c] if c else None,
                                         "lead_time": None, "dropped": False})  # fmt: skip
        if bad:
            out["reward_labels"].append(_error(f"{tid}/choices", "reward_labels",
                f"{len(bad)} annotation(s) of {tid[:200]} hold none of the four choices"))  # fmt: skip
        if not anns:
            continue
        vote = majority([a["choice"] for a in anns])
        src = rec.get("source")  # forenset's export marks labels that are not human's
        out["reward_labels"].append({
            "triplet_id": tid, "source": src if isinstance(src, str) and src else "human",
            "label": vote.label,
            "resolved_by": "majority" if vote.label else None, "tied": vote.tied,
            "n_annotations": len(anns), "n_dropped": 0,
            "votes": json.dumps(dict(Counter(a["choice"] for a in anns)), sort_keys=True),
            "annotations": json.dumps(anns), "status": "ok",
        })  # fmt: skip
    for e in rel.errors:
        out[e["table"]].append(e)
    return out


# -- a release as the reward stages' input -----------------------------------------------------
POLICY_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")  # a policy is a shard partition: a safe name
PROBLEMS_PARTITION = "release-problems"  # the responses shard of rows naming no usable policy
KEYS = {"reward_responses": "response_id", "reward_triplets": "triplet_id",
        "reward_labels": "triplet_id"}  # fmt: skip


def release_digest(rel: Release) -> str:
    """The content of a release as read (files, records and problems): the fingerprint of the
    reward stages that take it as input, so that an edited release recomputes them."""
    import hashlib

    doc = json.dumps([rel.responses, rel.records, rel.errors], sort_keys=True, default=str)
    return hashlib.blake2b(doc.encode("utf-8"), digest_size=16).hexdigest()


def stage_rows(rel: Release) -> dict[str, list[dict[str, Any]]]:
    """:func:`read_release`'s rows in the stages' shapes: an error row keyed by the table's key
    (``release-problem/<where>``); a repeated key (an image answered twice by one policy, a
    triplet id used twice) an error row, the first kept; a policy whose name cannot name a
    partition an error row."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table, rows in read_release(rel).items():
        key, seen, mine = KEYS[table], set(), []
        for r in rows:
            if r["status"] == "error":
                mine.append({key: f"release-problem/{r['id']}", "status": "error",
                             "error": r["error"], "retryable": False})  # fmt: skip
                continue
            if table == "reward_responses" and not POLICY_NAME.match(r["policy"]):
                mine.append({key: f"release-problem/{r[key]}", "status": "error",
                             "error": f"policy file name {r['policy'][:80]!r} is not a usable "
                             "policy name (letters, digits, . _ -)", "retryable": False})  # fmt: skip
                continue
            if r[key] in seen:
                mine.append({key: f"release-problem/repeated/{r[key]}#{len(mine)}",
                             "status": "error", "retryable": False,
                             "error": f"{r[key][:200]} is repeated in the release (the first "
                             "is kept)"})  # fmt: skip
                continue
            seen.add(r[key])
            mine.append(r)
        out[table] = mine
    return out


# -- the release's analysis conventions ---------------------------------------------------------
@dataclass(frozen=True)
class Number:
    """A value with its n and bootstrap interval (None: too few units or no resamples)."""

    value: float
    n: int
    ci: tuple[float, float] | None = None


def policy_accuracy(
    rel: Release, intervals: IntervalsConfig, seed: int = 0
) -> dict[str, dict[str, Number]]:
    """Per model: ``synthetic`` (FI), ``real`` (RI) and ``overall`` accuracy as the release's
    ``analyze_policy_accuracy.py`` computes it (an unparsed answer is wrong)."""
    per: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for fname, rows in rel.responses.items():
        expected = "fake" if fname.startswith("FI") else "real"
        hits = [float(isinstance(r, dict) and parse_verdict(r.get("answer")) == expected)
                for r in rows]  # fmt: skip
        per[model_name(fname)]["synthetic" if expected == "fake" else "real"] = hits
    out: dict[str, dict[str, Number]] = {}
    for model in sorted(per):
        slices = dict(per[model])
        slices["overall"] = [x for k in ("synthetic", "real") for x in slices.get(k, [])]
        out[model] = {k: _mean_number(v, intervals, seed, f"acc/{model}/{k}")
                      for k, v in slices.items()}  # fmt: skip
    return out


def _mean_number(xs: Sequence[float], intervals: IntervalsConfig, seed: int, key: str) -> Number:
    if not xs:
        return Number(0.0, 0)
    ci, _ = units_bootstrap(list(xs), lambda d: {"m": sum(d) / len(d)},  # type: ignore[arg-type]
                            resamples=intervals.resamples, level=intervals.level,
                            seed=row_seed(intervals.seed if intervals.seed is not None else seed, key))  # fmt: skip
    return Number(sum(xs) / len(xs), len(xs), ci.get("m"))


@dataclass(frozen=True)
class Game:
    first: str
    second: str
    score: float  # the first policy's: 1, 0 or 0.5


def games(rel: Release, include_neutral: bool = False) -> list[Game]:
    """Every annotation a game, in the release's order (``calculate_elo.py``)."""
    out = []
    for key in sorted(rel.records):
        rec = rel.records[key]
        if not isinstance(rec, dict):
            continue
        first, second = model_name(rec.get("csv1")), model_name(rec.get("csv2"))
        if not first or not second:
            continue
        anns = rec.get("annotations") or {}
        for a in anns.values() if isinstance(anns, dict) else []:
            c = normalize_choice(a.get("choice") if isinstance(a, dict) else None)
            s = {"response_1_better": 1.0, "response_2_better": 0.0}.get(c or "")
            if s is None and include_neutral and c in ("tie", "both_bad"):
                s = 0.5
            if s is not None:
                out.append(Game(first, second, s))
    return out


def elo(gs: Sequence[Game], k: float = K_DEFAULT, start: float = START) -> dict[str, float]:
    r: dict[str, float] = {}
    for g in gs:
        ra, rb = r.setdefault(g.first, start), r.setdefault(g.second, start)
        delta = k * (g.score - 1.0 / (1.0 + 10 ** ((rb - ra) / 400.0)))
        r[g.first], r[g.second] = ra + delta, rb - delta
    return r


@dataclass(frozen=True)
class EloRow:
    model: str
    rank: int
    elo: Number
    games: int
    wins: int
    losses: int
    neutral: int
    win_rate_non_neutral: float


def elo_table(rel: Release, intervals: IntervalsConfig, include_neutral: bool = False,
              seed: int = 0) -> list[EloRow]:  # fmt: skip
    """The release's Elo ranking, each rating with the interval of games resampled in order."""
    gs = games(rel, include_neutral)
    ratings = elo(gs)
    ci, _ = units_bootstrap(list(gs), lambda d: elo(d),  # type: ignore[arg-type]
                            resamples=intervals.resamples, level=intervals.level,
                            seed=row_seed(intervals.seed if intervals.seed is not None else seed, "elo"))  # fmt: skip
    st: dict[str, Counter[str]] = defaultdict(Counter)
    for g in gs:
        st[g.first]["games"] += 1
        st[g.second]["games"] += 1
        if g.score == 1.0:
            st[g.first]["wins"] += 1
            st[g.second]["losses"] += 1
        elif g.score == 0.0:
            st[g.first]["losses"] += 1
            st[g.second]["wins"] += 1
        else:
            st[g.first]["neutral"] += 1
            st[g.second]["neutral"] += 1
    out = []
    for rank, m in enumerate(sorted(ratings, key=lambda x: (-ratings[x], x)), start=1):
        s = st[m]
        dec = s["wins"] + s["losses"]
        out.append(EloRow(m, rank, Number(ratings[m], s["games"], ci.get(m)), s["games"],
                          s["wins"], s["losses"], s["neutral"], s["wins"] / dec if dec else 0.0))  # fmt: skip
    return out


def agreement(rel: Release, response_only: bool) -> dict[str, float | int]:
    """``analyze_annotations.agreement``: pairwise and unanimous rates over records with two or
    more (response-only: clear) choices."""
    total = match = analyzed = unanimous = 0
    for rec in rel.records.values():
        anns = rec.get("annotations") if isinstance(rec, dict) else None
        cs = [normalize_choice(a.get("choice") if isinstance(a, dict) else None)
              for a in (anns.values() if isinstance(anns, dict) else [])]  # fmt: skip
        cs = [c for c in cs if c and (not response_only or c in CLEAR)]
        if len(cs) < 2:
            continue
        analyzed += 1
        unanimous += int(len(set(cs)) == 1)
        total += len(cs) * (len(cs) - 1) // 2
        match += sum(a == b for a, b in combinations(cs, 2))
    return {"records": analyzed, "unanimous_rate": unanimous / analyzed if analyzed else 0.0,
            "pairs": total, "pairwise_rate": match / total if total else 0.0}  # fmt: skip


def choice_distribution(rel: Release) -> dict[str, int]:
    c: Counter[str] = Counter()
    for rec in rel.records.values():
        anns = rec.get("annotations") if isinstance(rec, dict) else None
        for a in anns.values() if isinstance(anns, dict) else []:
            x = normalize_choice(a.get("choice") if isinstance(a, dict) else None)
            if x:
                c[x] += 1
    return dict(c)


def release_tables(rel: Release, intervals: IntervalsConfig | None = None,
                   include_neutral: bool = False) -> dict[str, Any]:  # fmt: skip
    """Policy accuracy, Elo, agreement and the choice distribution by the release's rules."""
    iv = intervals or IntervalsConfig()
    return {
        "policy_accuracy": policy_accuracy(rel, iv),
        "elo": elo_table(rel, iv, include_neutral),
        "agreement_all_choices": agreement(rel, response_only=False),
        "agreement_response_only": agreement(rel, response_only=True),
        "choice_distribution": choice_distribution(rel),
    }
