"""The benchmark families, one package each, every one registered by a ``Family``
(``forenset.families``) in its ``__init__``.

``BUILTIN`` is the one list of the families that ship with forenset, in the order their
stages, commands and report sections appear. pyproject.toml registers the same objects in the
``forenset.families`` entry-point group; this list is read as well, so an install whose
metadata predates that group still finds them.
"""

BUILTIN: dict[str, str] = {
    "evaluation": "forenset.benchmarks.evaluation:FAMILY",
    "safeimg": "forenset.benchmarks.safeimg:FAMILY",
    "reward": "forenset.benchmarks.reward:FAMILY",
    "fakebench": "forenset.benchmarks.fakebench:FAMILY",
    "xdd": "forenset.benchmarks.xdd:FAMILY",
    "public": "forenset.benchmarks.public:FAMILY",
}
