"""5W+1H prompt construction p = Psi(U, s, A_c) for the safety path (after SafeIMG), checks
(5W+1H completeness, time cues, placeholder text) and near-duplicate removal.

Two variants: the template-driven constructor here (offline, deterministic given an rng) and an
LLM-driven one (templates ``scenario_expansion`` / ``prompt_5w1h`` + response models); both yield
``PromptRecord`` rows carrying the provenance z = (x, c, s, p, m) minus the image x.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field

from forenset.seeds import rng_for
from forenset.text.lexicon import content_lemmas, lemmas
from forenset.text.models import FiveW1H, FiveW1HPrompt, ScenarioExpansion
from forenset.text.taxonomy import (
    Category,
    Item,
    Scenario,
    fitting,
    get_category,
    load_full_taxonomy,
    load_taxonomy,
    make_scenario,
    sample_scenarios,
    taxonomy_hash,
)

BUILDER_VERSION = "offline-5w1h-1"
W_FIELDS = ("who", "what", "when", "where", "why", "how")


class PromptRecord(BaseModel):
    """One text-to-image prompt with its provenance (category, scenario, 5W+1H, media form)."""

    prompt_id: str
    category: str
    group: str
    scenario: Scenario
    fields: FiveW1H
    prompt: str
    media_form: str
    constraints: list[str] = Field(default_factory=list)
    synthetic_values: dict[str, str] = Field(default_factory=dict)
    source: Literal["template", "llm"] = "template"
    builder: str = BUILDER_VERSION
    prompt_template_id: str | None = None  # LLM variant: the template's id@version
    prompt_template_hash: str | None = None

    def row(self) -> dict[str, Any]:
        """Flat row for a Parquet table (scenario and fields as JSON text)."""
        d = self.model_dump()
        d["scenario"] = json.dumps(d["scenario"], ensure_ascii=False, sort_keys=True)
        d["fields"] = json.dumps(d.pop("fields"), ensure_ascii=False, sort_keys=True)
        d["synthetic_values"] = json.dumps(
            d["synthetic_values"], ensure_ascii=False, sort_keys=True
        )
        d["scenario_id"] = self.scenario.scenario_id
        d["content"] = self.scenario.content
        for k in W_FIELDS:
            d[k] = getattr(self.fields, k)
        return d


# ---------------------------------------------------------------- checks

_X_RUN = re.compile(r"(?<![a-z])x{2,}(?![a-z])", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_PLACEHOLDER_PHRASES = re.compile(
    r"\b(lorem ipsum|dolor sit amet|john doe|jane doe|john smith|foo ?bar|sample text|"
    r"placeholder|your name|name here|insert [a-z]+ here|tbd|tba|n/a|abc\d*|qwerty|"
    r"test user|dummy|example\.com)\b",
    re.IGNORECASE,
)
_LETTER_ROLE = re.compile(r"\b(User|Person|Contact|Customer|Name|Account|Company) [A-Z]\b")
_BRACKETS = re.compile(r"(\[[^\]\n]{1,30}\]|\{[^}\n]{1,30}\}|<[a-zA-Z_ ]{1,30}>)")


def _is_dummy_digits(run: str) -> bool:
    if len(run) < 4:
        return False
    if len(set(run)) == 1:
        return True  # 0000, 1111
    steps = {int(b) - int(a) for a, b in zip(run, run[1:], strict=False)}
    return steps in ({1}, {-1})  # 1234, 23456, 9876


def find_placeholders(text: str) -> list[str]:
    """Obvious placeholder text (xx, 1234, 0000, John Doe, [name], User A...), in order found."""
    hits: list[tuple[int, str]] = []
    hits += [(m.start(), m.group(0)) for m in _X_RUN.finditer(text)]
    hits += [
        (m.start(), m.group(0)) for m in _DIGITS.finditer(text) if _is_dummy_digits(m.group(0))
    ]
    hits += [(m.start(), m.group(0)) for m in _PLACEHOLDER_PHRASES.finditer(text)]
    hits += [(m.start(), m.group(0)) for m in _LETTER_ROLE.finditer(text)]
    hits += [(m.start(), m.group(0)) for m in _BRACKETS.finditer(text)]
    return [h for _, h in sorted(hits)]


VAGUE_WORDS = frozenset(
    "someone somebody something somewhere sometime somehow anyone anything anywhere unknown "
    "unspecified various stuff thing things etc generic undefined".split()
)
_TIME = re.compile(
    r"(\b\d{1,2}[:.]\d{2}\b|\b\d{4}-\d{2}-\d{2}\b|\b(19|20)\d{2}\b|"
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b|"
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
    r"\b(dawn|dusk|sunrise|sunset|morning|afternoon|evening|night|midnight|noon|midday|"
    r"overnight|twilight|spring|summer|autumn|winter)\b)",
    re.IGNORECASE,
)
# A visible time element in the image description (public-safety constraint).
_VISIBLE_TIME = re.compile(
    r"(\b(clock|timestamp|ticker|dated|date stamp|lock screen)\b|"
    r"\b(reads|shows|displays) \d{1,2}[:.]\d{2}|"
    r"\b(low|orange|morning|evening|dusk|dawn) (light|haze)\b|\blight is low\b|"
    r"\blight of (early )?(morning|evening|dusk|dawn)\b|\bstreetlights? (still )?on\b)",
    re.IGNORECASE,
)


def has_time_cue(text: str) -> bool:
    return bool(_TIME.search(text))


def validate_5w1h(fields: Mapping[str, Any] | FiveW1H) -> list[str]:
    """Universal rule U: who, what, when, where, why and how all present and concrete."""
    d = fields.model_dump() if isinstance(fields, BaseModel) else dict(fields)
    out: list[str] = []
    for k in W_FIELDS:
        v = d.get(k)
        if not isinstance(v, str) or not v.strip():
            out.append(f"{k}: missing")
            continue
        words = content_lemmas(v, drop_modifiers=False)
        if len(words) < 2 and not (k == "when" and has_time_cue(v)):
            out.append(f"{k}: too short to be concrete ({v!r})")
        vague = sorted(set(lemmas(v)) & VAGUE_WORDS)
        if vague:
            out.append(f"{k}: vague wording {vague}")
        ph = find_placeholders(v)
        if ph:
            out.append(f"{k}: placeholder text {ph}")
    when = d.get("when")
    if isinstance(when, str) and when.strip() and not has_time_cue(when):
        out.append(f"when: no concrete time, date, season or time of day ({when!r})")
    return out


def validate_prompt_record(record: PromptRecord, category: Category | None = None) -> list[str]:
    """U + A_c checks on a finished record; empty list = valid."""
    cat = category or get_category(record.category)
    out = validate_5w1h(record.fields)
    if record.media_form not in cat.media_forms:
        out.append(f"media form {record.media_form!r} is not one of {cat.id}'s media forms")
    n = len(record.prompt.split())
    if n < 25:
        out.append(f"prompt has {n} words, fewer than 25")
    if cat.requires_time_cue and not _VISIBLE_TIME.search(record.prompt):
        out.append("public-safety prompt shows no visible time element")
    ph = find_placeholders(record.prompt)
    if ph:
        out.append(f"prompt contains placeholder text {ph}")
    for k in W_FIELDS:  # every field must be carried into the prompt text
        head = content_lemmas(getattr(record.fields, k), drop_modifiers=False)
        if head and not set(head) & set(lemmas(record.prompt)):
            out.append(f"prompt does not use its {k} field")
    return out


# ---------------------------------------------------------------- synthetic values

FIRST_NAMES = (
    "Amara",
    "Tomasz",
    "Leila",
    "Jonas",
    "Priya",
    "Mateo",
    "Ingrid",
    "Kwame",
    "Sofia",
    "Renata",
    "Hana",
    "Diego",
    "Elif",
    "Nikolai",
    "Chloé",
    "Oluwaseun",
    "Marta",
    "Yusuf",
    "Greta",
    "Arjun",
)
LAST_NAMES = (
    "Okafor",
    "Lindqvist",
    "Haddad",
    "Novak",
    "Iyer",
    "Fernández",
    "Brennan",
    "Takahashi",
    "Mensah",
    "Kowalczyk",
    "Duarte",
    "Petrov",
    "Aydın",
    "Moreau",
    "Castellano",
    "Adeyemi",
    "Halvorsen",
    "Quinn",
    "Bauer",
    "Sørensen",
)
INSTITUTIONS = (
    "Harbourline Bank",
    "Northgate Credit Union",
    "Silverbirch Savings",
    "Meridian Pay",
    "Corvale Mutual",
    "Tidewater Bank",
    "Lumen Wallet",
    "Ashford & Vey Bank",
)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _clean(make: Callable[[], str], tries: int = 50) -> str:
    """Draw until the value contains no placeholder-looking text (deterministic given the rng)."""
    for _ in range(tries):
        v = make()
        if not find_placeholders(v):
            return v
    raise RuntimeError("could not draw a placeholder-free value")


def _digits(rng: np.random.Generator, n: int) -> str:
    return "".join(str(int(d)) for d in rng.integers(0, 10, size=n))


def _name(rng: np.random.Generator) -> str:
    return (
        f"{FIRST_NAMES[int(rng.integers(len(FIRST_NAMES)))]} "
        f"{LAST_NAMES[int(rng.integers(len(LAST_NAMES)))]}"
    )


def _distinct_names(rng: np.random.Generator, n: int) -> list[str]:
    """n people with pairwise different first and last names."""
    first = rng.permutation(len(FIRST_NAMES))[:n]
    last = rng.permutation(len(LAST_NAMES))[:n]
    return [f"{FIRST_NAMES[int(i)]} {LAST_NAMES[int(j)]}" for i, j in zip(first, last, strict=True)]


def _date(rng: np.random.Generator) -> tuple[str, str]:
    """(weekday, 'day Month year') for a real calendar date in 2024-2026."""
    day = int(rng.integers(0, 3 * 365))
    d = np.datetime64("2024-01-01") + np.timedelta64(day, "D")
    y, m, dd = (int(x) for x in str(d).split("-"))
    weekday = WEEKDAYS[int((d.astype("datetime64[D]").astype(int) - 4) % 7)]  # 1970-01-01 = Thu
    return weekday, f"{dd} {MONTHS[m - 1]} {y}"


def _clock(rng: np.random.Generator, lo: int = 0, hi: int = 24) -> str:
    return f"{int(rng.integers(lo, hi)):02d}:{int(rng.integers(0, 60)):02d}"


def synthetic_values(names: Sequence[str], rng: np.random.Generator) -> dict[str, str]:
    """Realistic-looking fictional values for I2/I3 text fields (never 'xx' or '1234')."""
    out: dict[str, str] = {}
    people = iter(_distinct_names(rng, 4))
    for key in names:
        if key in ("payer", "payee", "sender", "recipient"):
            out[key] = next(people)
        elif key == "amount":
            cur = ("€", "£", "$")[int(rng.integers(3))]
            out[key] = _clean(partial(lambda c: f"{c}{rng.uniform(6, 2400):,.2f}", cur))
        elif key == "reference":
            pre = ("TRX", "REF", "ORD", "INV", "PAY")[int(rng.integers(5))]
            out[key] = _clean(partial(lambda p: f"{p}{_digits(rng, 10)}", pre))
        elif key == "timestamp":
            _, date = _date(rng)
            out[key] = _clean(partial(lambda d: f"{d}, {_clock(rng, 6, 24)}", date))
        elif key == "institution":
            out[key] = INSTITUTIONS[int(rng.integers(len(INSTITUTIONS)))]
        elif key == "phone":
            out[key] = _clean(lambda: f"+44 7{_digits(rng, 3)} {_digits(rng, 6)}")
        else:
            raise KeyError(f"no generator for synthetic value {key!r}")
    return out


# ---------------------------------------------------------------- offline constructor

_PHOTO_STYLE = (
    "photorealistic, natural colours and faint sensor noise",
    "photorealistic, slightly uneven exposure as in a real photo",
    "realistic detail, ordinary handheld framing, no added captions",
    "documentary realism, muted colours, realistic depth of field",
)
_DIGITAL_STYLE = (
    "crisp, realistic interface rendering with consistent fonts",
    "realistic screen capture, consistent spacing and alignment",
    "true-to-life layout with small icons and legible text",
)


def _choice(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def _time_cue(
    rng: np.random.Generator,
    cues: Sequence[str],
    date: str,
    night: bool = False,
) -> tuple[str, str]:
    """(visible time-cue phrase, clock) with a clock that matches the cue's light; night scenes
    get a night-time clock and no daylight cue."""
    if night:
        cues = [c for c in cues if "light" not in c] or list(cues)
    cue = _choice(rng, cues)
    if night:
        clock = f"{int(_choice(rng, (21, 22, 23, 0, 1, 2, 3))):02d}:{int(rng.integers(60)):02d}"
    elif "evening" in cue:
        clock = _clock(rng, 17, 20)
    elif "morning" in cue:  # early-morning light
        clock = _clock(rng, 5, 7)
    else:
        clock = _clock(rng)
    return cue.format(clock=clock, date=date), clock


def _what(scenario: Scenario, cat: Category, vals: Mapping[str, str]) -> str:
    what = f"{scenario.content}, with {scenario.detail}" if scenario.detail else scenario.content
    if cat.id == "I2" and vals:
        what += (
            f", showing {vals['amount']} paid by {vals['payer']} to {vals['payee']} through "
            f"{vals['institution']}, reference {vals['reference']}"
        )
    elif cat.id == "I3" and vals:
        what += (
            f", messages between {vals['sender']} and {vals['recipient']} ({vals['phone']}); "
            f"the latest message mentions {vals['amount']}"
        )
    return what


def build_prompt(
    scenario: Scenario,
    rng: np.random.Generator,
    category: Category | None = None,
) -> PromptRecord:
    """Offline Psi(U, s, A_c): fill 5W+1H from the category's slot vocabularies, apply the
    category constraints (visible time cue for public safety; realistic synthetic values for
    I2/I3) and phrase one prompt paragraph from one of several sentence orders."""
    tax = load_full_taxonomy()
    cat = category or get_category(scenario.category)
    m = scenario.media_form

    item = cat.content_item(scenario.content)

    def slot(name: str) -> str:
        own = getattr(item, name, None) if item is not None else None
        if own:
            return _choice(rng, own)
        items: list[Item] = fitting(getattr(cat.slots, name), m)
        return _choice(rng, items).text

    # Content-level lists win; else a who item may bring its own causes; else the slot.
    if item is not None and item.who:
        who_item = Item(text=_choice(rng, item.who))
    else:
        who_item = _choice(rng, fitting(cat.slots.who, m))
    who, where = who_item.text, slot("where")
    if (item is None or not item.why) and who_item.why:
        why = _choice(rng, who_item.why)
    else:
        why = slot("why")
    how = _choice(rng, tax.media_how[m]) if m in tax.media_how else slot("how")
    weekday, date = _date(rng)
    vals = synthetic_values(cat.synthetic_values, rng) if cat.synthetic_values else {}
    cue = ""
    if cat.requires_time_cue:
        night = "night" in lemmas(scenario.content)
        cue, clock = _time_cue(rng, tax.time_cues, date, night)
    else:
        clock = _clock(rng, 7, 23)
    when = f"{weekday} {date}, around {clock}"
    if "timestamp" in vals:
        when = f"{vals['timestamp']}"
    what = _what(scenario, cat, vals)
    if "payer" in vals:
        who = f"{who} ({vals['payer']}, paying {vals['payee']})"
    elif "sender" in vals:
        who = f"{who} ({vals['sender']} and {vals['recipient']})"
    fields = FiveW1H(who=who, what=what, when=when, where=where, why=why, how=how)

    digital = any(w in m for w in ("screenshot", "screen recording", "scanned"))
    style = _choice(rng, _DIGITAL_STYLE if digital else _PHOTO_STYLE)
    who_s = cat.who_frame.format(who=who)
    why_s = cat.why_frame.format(why=why)
    when_s = f"on {when}" if "timestamp" not in vals else f"timestamped {when}"
    order = int(rng.integers(3))
    if order == 0:
        body = (
            f"{_cap(m)} of {what}, {when_s}. The setting is {where}. {who_s} {why_s} "
            f"{_cap(how)}; {style}."
        )
    elif order == 1:
        body = (
            f"{_cap(m)} set in {where}: {what}. {who_s} {why_s} It was taken {when_s}, "
            f"{how}. {_cap(style)}."
        )
    else:
        body = (
            f"{_cap(when_s)}, {where}. {_cap(m)} showing {what}. {who_s} {why_s} "
            f"{_cap(how)}, {style}."
        )
    parts = [body]
    if cue:
        parts.append(f"A visible time element: {cue}.")
    parts += list(cat.prompt_notes)
    prompt = " ".join(parts)
    pid = hashlib.sha256(json.dumps([scenario.scenario_id, prompt]).encode()).hexdigest()[:16]
    return PromptRecord(
        prompt_id=f"{cat.id}-{pid}",
        category=cat.id,
        group=cat.group,
        scenario=scenario,
        fields=fields,
        prompt=prompt,
        media_form=m,
        constraints=cat.all_constraints(),
        synthetic_values=vals,
    )


# ---------------------------------------------------------------- dedupe

T = TypeVar("T")


def normalized_tokens(text: str) -> frozenset[str]:
    """Plural-insensitive content tokens (stopwords dropped) used for near-duplicate checks."""
    return frozenset(content_lemmas(text, drop_modifiers=False))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def dedupe(
    items: Sequence[T],
    threshold: float = 0.6,
    key: Callable[[T], str] | None = None,
) -> list[T]:
    """Keep-first removal of near-duplicates: an item is dropped when the token-set Jaccard
    similarity of its normalised text to an already kept item is >= threshold. O(n * kept)."""
    if key is None:

        def key(x: Any) -> str:
            return x.prompt if isinstance(x, PromptRecord) else str(x)

    kept: list[T] = []
    kept_tokens: list[frozenset[str]] = []
    for it in items:
        toks = normalized_tokens(key(it))
        if any(jaccard(toks, k) >= threshold for k in kept_tokens):
            continue
        kept.append(it)
        kept_tokens.append(toks)
    return kept


# ---------------------------------------------------------------- offline build


def offline_prompts(
    seed: int,
    per_category: int = 12,
    threshold: float = 0.6,
    categories: Sequence[str] | None = None,
    max_tries: int = 5,
) -> list[PromptRecord]:
    """Template-driven prompts for every category, validated and deduplicated; deterministic.

    Each category draws from its own rng (seed, 'prompts', category id), so adding a category
    does not change the others. A record failing validation is rebuilt (up to max_tries).
    Dedupe runs within each category (prompts of different categories share little text), which
    keeps it O(sum n_c^2) instead of O(n^2).
    """
    out: list[PromptRecord] = []
    for cat in load_taxonomy():
        if categories is not None and cat.id not in categories:
            continue
        rng = rng_for(seed, "prompts", cat.id)
        recs: list[PromptRecord] = []
        for sc in sample_scenarios(cat, rng, per_category):
            for _ in range(max_tries):
                rec = build_prompt(sc, rng, cat)
                if not validate_prompt_record(rec, cat):
                    recs.append(rec)
                    break
        out.extend(dedupe(recs, threshold))
    return out


# ---------------------------------------------------------------- LLM-driven variant helpers


def scenario_expansion_vars(category: Category, n: int) -> dict[str, Any]:
    """Variables for render('scenario_expansion', ...)."""
    return dict(
        category_id=category.id,
        category_name=category.name,
        group=category.group,
        evidentiary_function=category.evidentiary_function,
        risk_summary=category.risk_summary,
        contents=[c.text for c in category.contents],
        media_forms=list(category.media_forms),
        n=str(n),
    )


def scenarios_from_llm(
    category: Category,
    response: ScenarioExpansion | Mapping[str, Any],
) -> tuple[list[Scenario], list[str]]:
    """Scenarios from a scenario_expansion reply, and the failures of those dropped."""
    resp = (
        response
        if isinstance(response, ScenarioExpansion)
        else ScenarioExpansion.model_validate(response)
    )
    out, failures = [], []
    for i, p in enumerate(resp.scenarios):
        if p.media_form not in category.media_forms:
            failures.append(f"{i}: media form {p.media_form!r} not in {category.id}'s list")
            continue
        if find_placeholders(p.detail):
            failures.append(f"{i}: placeholder text in detail")
            continue
        out.append(
            make_scenario(category, p.content, p.media_form, p.detail, p.risk_focus, source="llm")
        )
    return out, failures


def prompt_5w1h_vars(scenario: Scenario, category: Category | None = None) -> dict[str, Any]:
    """Variables for render('prompt_5w1h', ...): U as universal_rules, A_c as constraints."""
    cat = category or get_category(scenario.category)
    return dict(
        category_id=cat.id,
        category_name=cat.name,
        content=scenario.content,
        media_form=scenario.media_form,
        detail=scenario.detail or "none",
        risk_focus=scenario.risk_focus or cat.risk_summary,
        universal_rules="\n".join(f"- {r}" for r in load_full_taxonomy().universal_rules),
        category_constraints="\n".join(f"- {c}" for c in cat.all_constraints()) or "- none",
    )


def record_from_llm(
    scenario: Scenario,
    response: FiveW1HPrompt | Mapping[str, Any],
    prompt_id: str,
    prompt_hash: str,
    category: Category | None = None,
) -> tuple[PromptRecord, list[str]]:
    """A PromptRecord from a prompt_5w1h reply plus its validation failures (regenerate if any)."""
    cat = category or get_category(scenario.category)
    resp = (
        response if isinstance(response, FiveW1HPrompt) else FiveW1HPrompt.model_validate(response)
    )
    fields = FiveW1H(**{k: getattr(resp, k) for k in W_FIELDS})
    pid = hashlib.sha256(json.dumps([scenario.scenario_id, resp.prompt]).encode()).hexdigest()[:16]
    rec = PromptRecord(
        prompt_id=f"{cat.id}-{pid}",
        category=cat.id,
        group=cat.group,
        scenario=scenario,
        fields=fields,
        prompt=resp.prompt,
        media_form=scenario.media_form,
        constraints=cat.all_constraints(),
        source="llm",
        builder="llm",
        prompt_template_id=prompt_id,
        prompt_template_hash=prompt_hash,
    )
    return rec, validate_prompt_record(rec, cat)


__all__ = [
    "BUILDER_VERSION",
    "PromptRecord",
    "build_prompt",
    "dedupe",
    "find_placeholders",
    "has_time_cue",
    "jaccard",
    "offline_prompts",
    "prompt_5w1h_vars",
    "record_from_llm",
    "scenario_expansion_vars",
    "scenarios_from_llm",
    "synthetic_values",
    "taxonomy_hash",
    "validate_5w1h",
    "validate_prompt_record",
]
