"""The image-backend factory: names from entry points, plugins installed as real distributions.

A plugin here is what pip would leave behind: a module on sys.path next to a
``<name>.dist-info`` folder with METADATA and entry_points.txt, found by importlib.metadata.
"""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from forenset.backends.image import factory
from forenset.backends.image.generator import GeneratorConfig
from forenset.config import ConfigError, validate_config
from forenset.errors import ConfigurationError
from forenset.flows.local import run_local
from tests.conftest import small_config_dict
from tests.helpers import rows

BUILTINS = ["diffusers", "gemini", "offline", "openai"]

NEGATIVE = '''
from PIL import Image, ImageOps

from forenset.backends.image.base import ImageResult


class NegativeGenerator:
    """Edits invert the photo; text-to-image paints the colour given in the generator's options."""

    name = "negative"
    tasks = {"edit", "t2i"}

    def __init__(self, fill):
        self.fill = fill

    @classmethod
    def from_generator(cls, generator):
        return cls(tuple(generator.options["fill"]))

    def edit(self, requests):
        return [
            ImageResult(ImageOps.invert(r.image.convert("RGB")), model="neg-1", params={"how": "invert"})
            for r in requests
        ]

    def generate(self, requests):
        return [ImageResult(Image.new("RGB", r.size, self.fill), model="neg-1") for r in requests]
'''


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install a one-module distribution whose entry points name classes in that module."""
    modules: list[str] = []

    def _install(dist: str, module: str, source: str, entries: dict[str, str]) -> Path:
        root = tmp_path / f"site-{dist}"
        info = root / f"{dist.replace('-', '_')}-0.1.dist-info"  # as a wheel names it
        info.mkdir(parents=True)
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        lines = [f"{name} = {value}" for name, value in entries.items()]
        (info / "entry_points.txt").write_text(f"[{factory.GROUP}]\n" + "\n".join(lines) + "\n")
        monkeypatch.syspath_prepend(str(root))
        modules.append(module)
        return root

    yield _install
    for m in modules:
        sys.modules.pop(m, None)


def test_builtins_are_entry_points():
    assert set(BUILTINS) <= set(factory.names())
    from forenset.backends.image.offline import OfflineEditor

    assert factory.backend_class("offline") is OfflineEditor


def test_unknown_backend_is_one_sentence_listing_the_known_ones():
    with pytest.raises(ConfigError) as e:
        validate_config({"generators": [{"name": "g", "backend": "dalle-xl"}]}, "x.yaml")
    msg = str(e.value)
    assert msg == (
        "Invalid config x.yaml: bad value for 'generators.0.backend': unknown image backend "
        f"'dalle-xl' (known: {', '.join(factory.names())})."
    )
    assert all(b in msg for b in BUILTINS)
    with pytest.raises(ConfigurationError, match=r"^unknown image backend 'dalle-xl' \(known: "):
        factory.backend_class("dalle-xl")


def test_plugin_generator_edits_and_generates_in_a_build(tmp_path, install):
    gen = {"name": "neg", "backend": "negative", "family": "plugin", "options": {"fill": [9, 8, 7]}}
    with pytest.raises(ValidationError, match="unknown image backend 'negative'"):
        GeneratorConfig.model_validate(gen)  # not installed yet
    install(
        "negative-plugin",
        "negative_plugin",
        NEGATIVE,
        {"negative": "negative_plugin:NegativeGenerator"},
    )
    assert "negative" in factory.names()
    assert GeneratorConfig.model_validate(gen).tasks() == {"edit", "t2i"}

    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            generators=[{**gen, "t2i_size": [24, 16]}],
            sources={"samples": ["coffee", "rocket"], "max_side": 64},
            scenarios={"per_category": 1, "categories": ["P1", "I2"]},
        )
    )
    store, _, _ = run_local(cfg)
    cands = rows(store, "candidates")
    assert cands and all(r["status"] == "ok" and r["backend"] == "negative" for r in cands), cands
    assert {r["generator"] for r in cands} == {"neg"} and {r["model"] for r in cands} == {"neg-1"}
    t2i = [r for r in cands if r["kind"] == "t2i"]
    edits = [r for r in cands if r["kind"] != "t2i"]
    assert len(t2i) == len(rows(store, "prompts")) == 2 and edits

    def image(blob: str) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(store.get_blob(blob))).convert("RGB"))

    for r in t2i:  # the options reached the plugin
        assert (r["width"], r["height"]) == (24, 16)
        assert (image(r["blob"]) == [9, 8, 7]).all()
    for r in edits:  # the plugin's pixels, not an offline editor's
        assert np.array_equal(image(r["blob"]), 255 - image(r["source_blob"]))


def test_plugin_that_fails_to_load_is_a_configuration_error(install):
    install(
        "broken-plugin",
        "broken_plugin",
        "import not_a_module_anywhere\n",
        {"broken": "broken_plugin:Gen"},
    )
    gen = GeneratorConfig(name="b", backend="broken")  # the name is registered: it validates
    with pytest.raises(ConfigurationError) as e:
        gen.tasks()
    msg = str(e.value)
    assert msg.startswith("Image backend 'broken' (broken_plugin:Gen, from broken-plugin) could")
    assert "ModuleNotFoundError" in msg and msg.count(". ") == 0 and msg.endswith(".")


def test_a_name_claimed_by_two_packages_is_a_configuration_error(install):
    source = "class Gen:\n    tasks = {'edit'}\n\n    @classmethod\n    def from_generator(cls, g):\n        return cls()\n"
    install("twin-a", "twin_a", source, {"twin": "twin_a:Gen"})
    install("twin-b", "twin_b", source, {"twin": "twin_b:Gen"})
    assert factory.names().count("twin") == 1
    with pytest.raises(ConfigurationError, match="'twin' is registered by more than one package"):
        factory.create(GeneratorConfig(name="t", backend="twin"))


def test_declared_tasks_are_checked(install):
    source = "class Gen:\n    tasks = {'inpaint'}\n\n    @classmethod\n    def from_generator(cls, g):\n        return cls()\n"
    install("odd-plugin", "odd_plugin", source, {"odd": "odd_plugin:Gen"})
    with pytest.raises(ConfigurationError, match=r"declares tasks \['inpaint'\]"):
        GeneratorConfig(name="o", backend="odd").tasks()


def test_backend_for_raises_configuration_errors_instead_of_rows(monkeypatch):
    """The candidates stage builds its backend before any row: a missing key fails the shard."""
    from forenset.tasks.candidates import backend_for

    monkeypatch.delenv("IMG_NEVER_SET_KEY", raising=False)
    gen = GeneratorConfig(name="o", backend="openai", openai={"api_key_env": "IMG_NEVER_SET_KEY"})
    with pytest.raises(ConfigurationError, match="IMG_NEVER_SET_KEY, which is not set"):
        backend_for(gen)
