import json
import shutil
import subprocess
import sys

import pytest

from forenset.text.models import response_model_for
from forenset.text.templates import PROMPTS_DIR, list_templates, load_template, render

EXPECTED = {
    "caption",
    "edit_instructions",
    "instruction_difficulty",
    "visual_differences",
    "alignment_judge",
    "explain_complex",
    "explain_simple",
    "explain_authenticity",
    "scenario_expansion",
    "prompt_5w1h",
}


def _dummy_vars(tpl):
    return {v: f"<{v} value>" for v in tpl.variables if v != "schema"}


def test_every_task_has_a_template_with_a_response_model():
    assert EXPECTED <= set(list_templates())
    for tid in EXPECTED:
        tpl = load_template(tid)
        assert tpl.id == tid and tpl.version >= 1 and tpl.prompt_id == f"{tid}@{tpl.version}"
        assert len(tpl.content_hash) == 64
        assert response_model_for(tpl) is not None
        assert "schema" in tpl.variables


@pytest.mark.parametrize("tid", sorted(EXPECTED))
def test_render_fills_everything_and_embeds_schema(tid):
    tpl = load_template(tid)
    system, user, pid, phash = render(tid, **_dummy_vars(tpl))
    assert pid == tpl.prompt_id and phash == tpl.content_hash
    for v in tpl.variables:  # no placeholder left ($defs/$ref inside the JSON schema are fine)
        assert f"${v}" not in system + user and "${" + v + "}" not in system + user
    for v in tpl.variables - {"schema"}:
        assert f"<{v} value>" in system + user
    schema = response_model_for(tpl).model_json_schema()
    assert json.dumps(schema, sort_keys=True) in user


def test_render_rejects_missing_and_unknown_variables():
    tpl = load_template("caption")
    vars_ = _dummy_vars(tpl)
    with pytest.raises(ValueError, match="needs"):
        render("caption", **{k: v for k, v in list(vars_.items())[1:]})
    with pytest.raises(ValueError, match="no placeholders"):
        render("caption", **vars_, captoin="typo")
    with pytest.raises(KeyError):
        load_template("no_such_template")


def test_lists_render_as_text_and_objects_as_json():
    tpl = load_template("scenario_expansion")
    vars_ = _dummy_vars(tpl)
    vars_["contents"] = ["floods", "earthquakes"]
    vars_["n"] = 3
    _, user, _, _ = render("scenario_expansion", **vars_)
    assert "floods; earthquakes" in user and "Propose 3 distinct" in user


def test_hash_changes_when_template_text_changes(tmp_path):
    root = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, root)
    before = load_template("caption", root)
    assert before.content_hash == load_template("caption").content_hash
    path = root / "caption.yaml"
    path.write_text(path.read_text().replace("dense, factual caption", "dense factual caption"))
    after = load_template("caption", root)
    assert after.content_hash != before.content_hash
    assert after.prompt_id == before.prompt_id  # same id/version, new content -> new hash
    _, _, _, phash = render("caption", root, **_dummy_vars(after))
    assert phash == after.content_hash


def test_template_id_must_match_file_name(tmp_path):
    (tmp_path / "x.yaml").write_text("id: y\nversion: 1\nsystem: s\nuser: u\n")
    with pytest.raises(ValueError, match="declares id"):
        load_template("x", tmp_path)


def test_import_is_light():
    code = (
        "import sys, forenset.text, forenset.text.templates, forenset.text.instructions, "
        "forenset.text.safety_prompts, forenset.text.captions; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_code_path_a_prompt_file_names_exists():
    """Prompt files name the response models and parsers that read their replies; a module
    that moved (issue 30: scorers to forenset.benchmarks) must not leave a stale path."""
    import importlib
    import re

    named = {
        m.rstrip(".")
        for p in PROMPTS_DIR.glob("*.yaml")
        for m in re.findall(r"\bforenset(?:\.\w+)+", p.read_text())
    }
    assert named  # the descriptions do name code
    missing = []
    for path in sorted(named):
        module, _, attr = path.rpartition(".")
        try:
            found = hasattr(importlib.import_module(module), attr)
        except ImportError:
            found = False
        if not found:
            try:
                importlib.import_module(path)
            except ImportError:
                missing.append(path)
    assert not missing, f"prompt files name code that does not exist: {missing}"
