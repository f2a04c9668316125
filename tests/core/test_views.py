"""Stage views without stage code: `forenset query` and `status --details` read the table list
from state.json and empty tables' schemas from the manifests, so they need not import every
stage module (seconds of scipy, skimage, model SDKs and Prefect)."""

from __future__ import annotations

import json
import subprocess
import sys

from forenset.config import validate_config
from forenset.stages import stage_class
from forenset.stages import table_names as registered_tables
from forenset.store.views import connect, table_names
from tests.conftest import small_config_dict
from tests.helpers import run_local


def test_views_of_a_built_run_need_no_stage_code(tmp_path):
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": ["astronaut", "coffee"], "max_side": 64},
            scenarios={"enabled": False},  # scenarios and prompts stay empty: typed empty views
        )
    )
    store, stats, _ = run_local(cfg)
    assert not any(s.failures for s in stats.values())
    assert sorted(table_names(store)) == sorted(registered_tables())
    assert store.manifest("scenarios") == []
    assert store.manifest_schema("scenarios") == stage_class("scenarios").output_schema
    code = (
        "import json, sys\n"
        "from forenset.store.run_store import RunStore\n"
        "from forenset.store.views import connect, table_names\n"
        f"store = RunStore({str(tmp_path / 'run')!r})\n"
        "con = connect(store, table_names(store))\n"
        "cols = [d[0] for d in con.execute('SELECT * FROM scenarios').description]\n"
        "n = con.execute('SELECT count(*) FROM explanations').fetchone()[0]\n"
        "a = con.execute('SELECT count(*) FROM annotations').fetchone()[0]\n"
        "print(json.dumps({'cols': cols, 'n': n, 'annotations': a,\n"
        "    'stage_code': sorted(m for m in sys.modules if m.startswith('forenset.tasks')\n"
        "                         or m == 'forenset.flows.build')}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["stage_code"] == []
    assert got["cols"] == stage_class("scenarios").output_schema.names  # typed, from the manifest
    assert got["n"] > 0 and got["annotations"] == 0
    # the same views in process, for the record: identical column lists
    con = connect(store, table_names(store))
    assert [d[0] for d in con.execute("SELECT * FROM scenarios").description] == got["cols"]
