"""Pydantic response models for the LLM text stages (their JSON schema goes into prompts).

Models parse what a model returns; the checks that need context (grounding in a caption,
blocked content, placeholders) live in the validator functions, which return failure lists.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["person", "object", "geometry", "scene"]

# Edit kinds per family (XPlainVerse's four families). A kind may sit in two families:
# recolor is an attribute change on an object or on a person's clothing; liquify and
# local_warp deform an object or a body part.
FAMILY_KINDS: dict[str, tuple[str, ...]] = {
    "person": (
        "attribute",
        "emotion",
        "pose",
        "clothing",
        "hairstyle",
        "accessory",
        "recolor",
        "liquify",
    ),
    "object": ("insertion", "removal", "replacement", "copy_move", "recolor", "splice"),
    "geometry": ("local_warp", "liquify", "resize", "reposition"),
    "scene": ("lighting", "weather", "background", "time_of_day"),
}
ALL_KINDS: tuple[str, ...] = tuple(sorted({k for ks in FAMILY_KINDS.values() for k in ks}))
Kind = Literal[ALL_KINDS]  # type: ignore[valid-type]

BBox = list[float]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CaptionResponse(_Model):
    caption: str = Field(description="Dense factual caption, plain declarative sentences.")
    entities: list[str] = Field(default_factory=list, description="Concrete noun phrases named.")


class EditInstruction(_Model):
    text: str = Field(description="One imperative sentence an image editor can follow.")
    family: Family
    kind: Kind
    target: str = Field(
        description="Entity to edit, in the caption's words; the new object for insertions."
    )
    location_hint: str = Field(description="Where in the image the change happens.")
    expected_change: str = Field(description="What a before/after viewer will see.")
    difficulty: int | None = Field(default=None, ge=1, le=5)


class EditInstructionSet(_Model):
    instructions: list[EditInstruction] = Field(min_length=1, max_length=8)


class DifficultyRating(_Model):
    index: int = Field(ge=0)
    difficulty: int = Field(ge=1, le=5)
    reason: str


class DifficultyRatings(_Model):
    ratings: list[DifficultyRating]


ChangeType = Literal[
    "added",
    "removed",
    "replaced",
    "recolored",
    "moved",
    "duplicated",
    "reshaped",
    "resized",
    "lighting",
    "texture",
    "text",
    "background",
    "other",
]


class VisualDifference(_Model):
    region: str
    change_type: ChangeType
    description: str
    salience: int = Field(ge=1, le=5)
    bbox: BBox | None = Field(default=None, min_length=4, max_length=4)


class VisualDifferences(_Model):
    differences: list[VisualDifference] = Field(default_factory=list)
    identical: bool = False


class AlignmentJudgment(_Model):
    match_score: float = Field(ge=0, le=1)
    offtarget_penalty: float = Field(ge=0, le=1)
    final_score: float = Field(ge=0, le=1)
    verdict: Literal["KEEP", "BORDERLINE", "DISCARD"]
    failure_category: Literal[
        "none", "edit_missing", "edit_partial", "off_target", "severe_artifacts", "ambiguous"
    ]
    rationale: str


class Cue(_Model):
    entity: str
    evidence: str


class ComplexExplanation(_Model):
    explanation: str
    cues: list[Cue] = Field(min_length=1)


class SimpleExplanation(_Model):
    explanation: str
    entity: str = Field(description="The object the single reason is about.")


class AuthenticityExplanation(_Model):
    explanation: str
    cues: list[Cue] = Field(min_length=1)


class ScenarioProposal(_Model):
    content: str
    media_form: str
    detail: str
    risk_focus: str


class ScenarioExpansion(_Model):
    scenarios: list[ScenarioProposal] = Field(min_length=1)


class FiveW1H(_Model):
    who: str
    what: str
    when: str
    where: str
    why: str
    how: str


class FiveW1HPrompt(FiveW1H):
    prompt: str


RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (
        CaptionResponse,
        EditInstructionSet,
        DifficultyRatings,
        VisualDifferences,
        AlignmentJudgment,
        ComplexExplanation,
        SimpleExplanation,
        AuthenticityExplanation,
        ScenarioExpansion,
        FiveW1HPrompt,
    )
}


def response_model_for(template: object) -> type[BaseModel] | None:
    """The pydantic model a template (or a model name) asks the LLM to return."""
    name = template if isinstance(template, str) else getattr(template, "response_model", None)
    if name is None:
        return None
    if name not in RESPONSE_MODELS:
        raise KeyError(f"unknown response model {name!r}")
    return RESPONSE_MODELS[name]
