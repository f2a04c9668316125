"""`pip install .` ships only the package and its package-data globs: a data file the code reads
from outside `forenset/`, or one no glob matches, works in the editable checkout and fails
after a real install (the default config once lived in examples/)."""

from __future__ import annotations

import glob
import tomllib
from pathlib import Path

import forenset
from forenset.config import DEFAULT_CONFIG
from forenset.tasks.sources import SAMPLES_FILE
from forenset.text.taxonomy import TAXONOMY_PATH
from forenset.text.templates import PROMPTS_DIR

PKG = Path(forenset.__file__).resolve().parent
ROOT = PKG.parent
DATA_SUFFIXES = {".yaml", ".yml", ".json", ".txt"}


def shipped() -> set[str]:
    """Package-relative paths setuptools puts in the wheel for the pyproject globs (it expands
    each with glob(..., recursive=True) under the package dir, as here)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = meta["tool"]["setuptools"]["package-data"]["forenset"]
    out: set[str] = set()
    for g in globs:
        out |= {
            Path(p).as_posix()
            for p in glob.glob(g, root_dir=PKG, recursive=True)
            if (PKG / p).is_file()
        }
    return out


def test_every_data_file_in_the_package_is_package_data():
    data = {
        p.relative_to(PKG).as_posix()
        for p in PKG.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts
    }
    assert "data/demo.yaml" in data and "data/samples.yaml" in data
    missing = sorted(data - shipped())
    assert not missing, (
        f"not matched by [tool.setuptools.package-data] in pyproject.toml: {missing}"
    )


def test_default_build_reads_only_files_inside_the_package():
    for name, path in {
        "DEFAULT_CONFIG": DEFAULT_CONFIG,
        "SAMPLES_FILE": SAMPLES_FILE,
        "TAXONOMY_PATH": TAXONOMY_PATH,
    }.items():
        p = Path(path).resolve()
        assert p.is_relative_to(PKG), f"{name} = {p} is outside the package dir {PKG}"
        assert p.is_file(), f"{name} = {p} does not exist"
        assert p.relative_to(PKG).as_posix() in shipped(), f"{name} is not package data"
    prompts = Path(PROMPTS_DIR).resolve()
    assert prompts.is_relative_to(PKG)
    templates = {p.relative_to(PKG).as_posix() for p in prompts.glob("*.yaml")}
    assert templates and templates <= shipped()
