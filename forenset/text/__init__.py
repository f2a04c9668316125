"""Text stages: prompt templates, captions, edit instructions, safety taxonomy and 5W+1H prompts.

Importing this package is light (pydantic, numpy, PyYAML; no torch). See docs/text-stages.md.
"""

from forenset.text.captions import speculation_terms, validate_caption
from forenset.text.instructions import (
    InstructionConfig,
    family_balance,
    offline_instructions,
    rate_difficulty,
    validate_instruction,
    validate_instructions,
)
from forenset.text.safety_prompts import (
    PromptRecord,
    build_prompt,
    dedupe,
    find_placeholders,
    offline_prompts,
    validate_5w1h,
    validate_prompt_record,
)
from forenset.text.taxonomy import (
    Category,
    Scenario,
    load_taxonomy,
    sample_scenarios,
    taxonomy_hash,
)
from forenset.text.templates import Template, list_templates, load_template, render

__all__ = [
    "Category",
    "InstructionConfig",
    "PromptRecord",
    "Scenario",
    "Template",
    "build_prompt",
    "dedupe",
    "family_balance",
    "find_placeholders",
    "list_templates",
    "load_taxonomy",
    "load_template",
    "offline_instructions",
    "offline_prompts",
    "rate_difficulty",
    "render",
    "sample_scenarios",
    "speculation_terms",
    "taxonomy_hash",
    "validate_5w1h",
    "validate_caption",
    "validate_instruction",
    "validate_instructions",
    "validate_prompt_record",
]
