"""Text stages: prompt templates, captions, edit instructions, safety taxonomy and 5W+1H prompts.

Importing this package is light (pydantic, numpy, PyYAML; no torch). Submodules:
``templates`` (load_template, render), ``models`` (LLM response models), ``captions``,
``instructions``, ``taxonomy`` and ``safety_prompts``.
"""
