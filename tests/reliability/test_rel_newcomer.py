"""Newcomer polish (issue 32): the documented ``annotations`` query works on a fresh run, and
``SHOW TABLES`` lists the run's tables only (no internal ``_*_empty`` helpers)."""

from __future__ import annotations

from forenset.store.run_store import RunStore
from forenset.store.views import connect, table_names


def fresh_run(tmp_path) -> RunStore:
    store = RunStore(str(tmp_path / "run"))
    store.write_json("state.json", {"status": "complete", "order": ["sources", "captions"]})
    return store


def test_documented_annotations_query_on_a_fresh_run(tmp_path):
    store = fresh_run(tmp_path)
    con = connect(store, table_names(store))
    # docs/exports.md, before any import-annotations: zero rows, not a Binder Error
    got = con.execute(
        "SELECT choice, count(*) FROM annotations WHERE task='triage' GROUP BY 1"
    ).fetchall()
    assert got == []
    assert con.execute("SELECT count(*) FROM gold_references WHERE overlap").fetchone() == (0,)


def test_show_tables_lists_the_run_tables_only(tmp_path):
    store = fresh_run(tmp_path)
    con = connect(store, table_names(store))
    names = sorted(r[0] for r in con.execute("SHOW TABLES").fetchall())
    assert names == sorted(table_names(store))
    assert not [n for n in names if n.startswith("_")]
