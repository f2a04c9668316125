"""Label Studio through its REST API: create the triage and region projects with a Local Files
storage each (without it the images 404), push tasks, and pull the annotations back.

The region project receives a sample's task only once its triage says ``ann`` (SafeIMG §2.5), so
``labelstudio-pull`` imports the triage, pushes the newly ``ann`` samples, then imports the
regions. Project ids and the pushed samples live in ``<export>/labelstudio_projects.json``.
Tested against fake transports here and against a real Label Studio by
``bench/labelstudio_roundtrip.sh``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from forenset.exports.data import write_atomic
from forenset.exports.labelstudio import (
    BBOX_XML,
    TRIAGE_XML,
    AnnotationImportError,
    import_annotations,
)
from forenset.store.run_store import RunStore

STATE_FILE = "labelstudio_projects.json"


class LabelStudioError(RuntimeError):
    """A Label Studio API call failed; the message names the call and the server's reply."""


class LabelStudio:
    """A thin client: legacy API tokens (``Token``) or personal access tokens (a JWT refresh
    token exchanged for an access token, ``Bearer``)."""

    def __init__(self, url: str, token: str, client: httpx.Client | None = None):
        self.url = url.rstrip("/")
        self.http = client or httpx.Client(timeout=60)
        if token.count(".") == 2:  # a personal access token (JWT refresh token)
            r = self.http.post(f"{self.url}/api/token/refresh/", json={"refresh": token})
            self._check(r, "token refresh")
            self.auth = f"Bearer {r.json()['access']}"
        else:
            self.auth = f"Token {token}"

    @staticmethod
    def _check(r: httpx.Response, what: str) -> None:
        if r.status_code >= 400:
            raise LabelStudioError(f"{what} failed: HTTP {r.status_code} {r.text[:200]}")

    def call(self, method: str, path: str, what: str, **kw: Any) -> Any:
        r = self.http.request(method, self.url + path, headers={"Authorization": self.auth}, **kw)
        self._check(r, what)
        return r.json() if r.content else None

    def create_project(self, title: str, label_config: str) -> int:
        doc = {"title": title, "label_config": label_config}
        return int(self.call("POST", "/api/projects/", "create project", json=doc)["id"])

    def add_local_storage(self, project: int, path: Path, title: str) -> int:
        doc = {
            "project": project,
            "title": title,
            "path": str(Path(path).resolve()),
            "use_blob_urls": True,
            "regex_filter": ".*",
        }
        return int(self.call("POST", "/api/storages/localfiles/", "add storage", json=doc)["id"])

    def import_tasks(self, project: int, tasks: list[dict[str, Any]]) -> int:
        if not tasks:
            return 0
        got = self.call("POST", f"/api/projects/{project}/import", "import tasks", json=tasks)
        return int((got or {}).get("task_count", len(tasks)))

    def export(self, project: int) -> bytes:
        r = self.http.get(
            f"{self.url}/api/projects/{project}/export",
            params={"exportType": "JSON", "download_all_tasks": "true"},
            headers={"Authorization": self.auth},
        )
        self._check(r, "export")
        return r.content


def _tasks(export_dir: Path, name: str) -> list[dict[str, Any]]:
    f = export_dir / name
    if not f.is_file():
        raise LabelStudioError(f"{f} is missing: run `forenset export RUN --format labelstudio`")
    return json.loads(f.read_text())


def _ann_samples(store: RunStore) -> set[str]:
    """Samples whose latest triage in the run's annotations is ``ann``."""
    from forenset.store.views import connect

    if not store.manifest("annotations"):
        return set()
    con = connect(store, ["annotations"])
    rows = con.execute(
        "SELECT sample_id, arg_max(choice, coalesce(created_at, '')) FROM annotations "
        "WHERE task = 'triage' AND status = 'ok' AND NOT was_cancelled GROUP BY sample_id"
    ).fetchall()
    return {s for s, c in rows if c == "ann"}


def _push_ann(ls: LabelStudio, store: RunStore, export_dir: Path, state: dict[str, Any]) -> int:
    pushed = set(state.get("bbox_pushed", []))
    new = [
        t
        for t in _tasks(export_dir, "bbox_tasks.json")
        if t["data"]["sample_id"] in _ann_samples(store) - pushed
    ]
    ls.import_tasks(state["bbox"], new)
    state["bbox_pushed"] = sorted(pushed | {t["data"]["sample_id"] for t in new})
    return len(new)


def setup_projects(
    store: RunStore, export_dir: Path, url: str, token: str, *, client: httpx.Client | None = None
) -> dict[str, Any]:
    """Create both projects, each with a Local Files storage on ``<export>/images``, and push
    the triage tasks (and region tasks of samples already triaged ``ann``)."""
    export_dir = Path(export_dir)
    ls = LabelStudio(url, token, client)
    triage = _tasks(export_dir, "triage_tasks.json")
    state: dict[str, Any] = {"url": ls.url}
    for key, title, xml in (
        ("triage", "forenset triage", TRIAGE_XML),
        ("bbox", "forenset regions", BBOX_XML),
    ):
        state[key] = ls.create_project(f"{title} ({store.root})"[:50], xml)
        ls.add_local_storage(state[key], export_dir / "images", f"{title} images")
    state["triage_tasks"] = ls.import_tasks(state["triage"], triage)
    state["bbox_pushed"] = []
    state["bbox_tasks"] = _push_ann(ls, store, export_dir, state)
    write_atomic(export_dir / STATE_FILE, json.dumps(state, indent=1))
    return state


def pull_annotations(
    store: RunStore, export_dir: Path, token: str, *, client: httpx.Client | None = None
) -> dict[str, Any]:
    """Export both projects (all tasks, so deleted ones show), import them into the run, and
    push region tasks for samples newly triaged ``ann``."""
    export_dir = Path(export_dir)
    f = export_dir / STATE_FILE
    if not f.is_file():
        raise LabelStudioError(f"{f} is missing: run `forenset labelstudio-setup` first")
    state = json.loads(f.read_text())
    ls = LabelStudio(state["url"], token, client)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out: dict[str, Any] = {}
    pulled = export_dir / "pulled"
    tri = pulled / f"triage-{stamp}.json"
    write_atomic(tri, ls.export(state["triage"]))
    info = import_annotations(store, tri, tasks_file=export_dir / "triage_tasks.json")
    out["triage"] = info.counts
    if state.get("bbox_pushed"):
        box = pulled / f"regions-{stamp}.json"
        write_atomic(box, ls.export(state["bbox"]))
        pushed = pulled / "regions-pushed.json"
        write_atomic(pushed, json.dumps([{"data": {"sample_id": s}} for s in state["bbox_pushed"]]))
        try:
            out["regions"] = import_annotations(store, box, append=True, tasks_file=pushed).counts
        except AnnotationImportError as e:
            out["regions"] = str(e)
    out["pushed_region_tasks"] = _push_ann(ls, store, export_dir, state)
    write_atomic(f, json.dumps(state, indent=1))
    return out
