"""Reading a config must not load the model SDKs: `forenset status`, `query` and config errors
answer in well under a second only if `forenset.config` stays free of openai / google-genai."""

from __future__ import annotations

import json
import subprocess
import sys

import forenset.backends.llm as llm


def test_package_names_resolve_lazily_to_their_modules():
    assert sorted(llm.__all__) == sorted(llm._WHERE)
    for name in llm.__all__:
        obj = getattr(llm, name)
        assert obj.__module__.startswith("forenset.backends.llm."), (name, obj.__module__)
    assert set(llm.__all__) <= set(dir(llm))


def test_config_import_loads_no_model_sdk():
    code = (
        "import sys, forenset.config\n"
        "from forenset.config import load_config\n"
        "load_config(None)\n"
        "heavy = [m for m in ('openai', 'google.genai', 'torch', 'diffusers') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"forenset.config imported {out.stdout.strip()}"


def test_image_backend_factory_loads_no_model_sdk():
    """Validating generators and asking what each built-in backend can do (planning does, for
    every generator) must not import the SDKs, torch or diffusers: only building one may."""
    code = (
        "import json, sys\n"
        "from forenset.backends.image import factory\n"
        "from forenset.backends.image.generator import GeneratorConfig\n"
        "tiny = {'diffusers': {'pipeline': 'StableDiffusionInstructPix2PixPipeline', 'tiny': True}}\n"
        "gens = [GeneratorConfig(name=b, backend=b, **(tiny if b == 'diffusers' else {}))\n"
        "        for b in ('offline', 'diffusers', 'openai', 'gemini')]\n"
        "tasks = {g.backend: sorted(g.tasks()) for g in gens}\n"
        "heavy = [m for m in ('openai', 'google.genai', 'torch', 'diffusers') if m in sys.modules]\n"
        "print(json.dumps({'names': factory.names(), 'tasks': tasks, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["heavy"] == [], f"the image-backend factory imported {got['heavy']}"
    assert {"offline", "diffusers", "openai", "gemini"} <= set(got["names"])
    assert got["tasks"] == {
        "offline": ["edit"],
        "diffusers": ["edit"],
        "openai": ["edit", "t2i"],
        "gemini": ["edit", "t2i"],
    }
