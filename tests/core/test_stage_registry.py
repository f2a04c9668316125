"""Coverage of what is registered: every stage and generator backend is documented and tested."""

from pathlib import Path
from typing import get_args

from forenset.config import GeneratorConfig
from forenset.flows.build import STAGES, TABLES
from forenset.schemas.common import TRACE_NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_every_stage_is_documented_and_traced():
    readme = (ROOT / "README.md").read_text()
    for s in STAGES:
        assert f"| {s.name} |" in readme, f"stage {s.name} missing from README's stage table"
        names = s.output_schema.names
        assert s.key in names, s.name
        assert all(t in names for t in TRACE_NAMES), f"{s.name} lacks trace columns"
        assert s.name in TABLES
        for up in s.inputs:
            assert up in {x.name for x in STAGES}, f"{s.name} reads unknown stage {up}"


def test_every_generator_backend_is_exercised_by_a_test():
    backends = get_args(GeneratorConfig.model_fields["backend"].annotation)
    text = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    text += "\n".join(p.read_text() for p in (ROOT / "examples").glob("*.yaml"))
    for b in backends:
        if b == "offline":
            continue  # the default of every test build
        assert f'"backend": "{b}"' in text or f"backend: {b}" in text, b
        assert (
            f"backend: {b}" in (ROOT / "docs" / "generation.md").read_text()
            or b in (ROOT / "docs" / "generation.md").read_text()
        ), f"generator backend {b} undocumented"


def test_test_module_names_are_unique():
    """pytest's default import mode needs unique basenames; a clash hides a whole folder."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
