"""Write tests/module_seconds.json from a junit XML report: seconds per test module.

tests/conftest.py hands modules to xdist workers longest first from this table, so that a
long module does not start last and run on alone. Refresh it after adding long tests:

    pytest -q -n auto --junitxml=/tmp/suite.xml && python scripts/module_seconds.py /tmp/suite.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_of(classname: str) -> str | None:
    """``tests.core.test_cli.TestX`` -> ``tests/core/test_cli.py`` (the longest dotted prefix
    that is a file in the checkout)."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        rel = "/".join(parts[:n]) + ".py"
        if (ROOT / rel).is_file():
            return rel
    return None


def main(report: str) -> None:
    seconds: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = module_of(case.get("classname", ""))
        if module is not None:
            seconds[module] = seconds.get(module, 0.0) + float(case.get("time") or 0)
    table = {m: round(s, 1) for m, s in sorted(seconds.items(), key=lambda kv: -kv[1])}
    out = ROOT / "tests" / "module_seconds.json"
    out.write_text(json.dumps(table, indent=0) + "\n")
    print(f"{out}: {len(table)} modules, {sum(table.values()):.0f} test-seconds")


if __name__ == "__main__":
    main(sys.argv[1])
