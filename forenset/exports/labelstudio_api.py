"""Label Studio through its REST API: create the triage and region projects with a Local Files
storage each (without it the images 404), push tasks, and pull the annotations back.

The region project receives a sample's task only once its triage says ``ann`` (the annotation
protocol of docs/exports.md), so ``labelstudio-pull`` imports the triage, pushes the newly
``ann`` samples, then imports the regions. Project ids and the pushed samples live in
``<export>/labelstudio_projects.json``.

Opt-in (``projects``), the same commands create and pull the benchmark families' projects
(``Family.labelstudio``: a golden-clue editing task, gold explanations). Their exports are only
downloaded; each project says what reads them back. One Label Studio serves one document root, so when several
export folders are in play their image URLs are rebased onto a common root.
Tested against fake transports here and against a real Label Studio by
``bench/labelstudio_roundtrip.sh``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import httpx

from forenset.errors import ForensetError
from forenset.exports.data import write_atomic
from forenset.exports.formats import CORE_PROJECT, project_names
from forenset.exports.labelstudio import (
    BBOX_XML,
    TRIAGE_XML,
    AnnotationImportError,
    import_annotations,
)
from forenset.families import AnnotationProject, annotation_projects, load_target
from forenset.store.run_store import RunStore

STATE_FILE = "labelstudio_projects.json"
LOCAL_FILES = "?d="  # the query of a Local Files image URL, before the path under the root


class LabelStudioError(ForensetError, RuntimeError):
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
    ls.import_tasks(state["bbox"], _rebase(new, state.get("safeimg_rel", ".")))
    state["bbox_pushed"] = sorted(pushed | {t["data"]["sample_id"] for t in new})
    return len(new)


def _rebase(tasks: list[dict[str, Any]], rel: str) -> list[dict[str, Any]]:
    """Tasks whose Local Files URLs point at ``rel/<path>`` (the export folder seen from the
    document root) instead of ``<path>``; unchanged when ``rel`` is the root itself."""
    if rel in ("", "."):
        return tasks
    out = []
    for t in tasks:
        data = {
            k: v.replace(LOCAL_FILES, f"{LOCAL_FILES}{rel}/", 1) if isinstance(v, str) else v
            for k, v in t["data"].items()
        }
        out.append({**t, "data": data})
    return out


def extra_dirs(store: RunStore) -> dict[str, Path]:
    """Default task folders of the families' projects (their export commands' defaults)."""
    from forenset.exports.data import default_out

    return {
        k: Path(default_out(store, p.folder)) / p.subfolder
        for k, p in annotation_projects().items()
    }


def setup_projects(
    store: RunStore,
    export_dir: Path,
    url: str,
    token: str,
    *,
    client: httpx.Client | None = None,
    projects: tuple[str, ...] = (CORE_PROJECT,),
    dirs: dict[str, Path] | None = None,
    document_root: Path | None = None,
) -> dict[str, Any]:
    """Create the requested projects, each with a Local Files storage on its export folder's
    ``images``, and import their tasks. ``CORE_PROJECT`` is the triage and region pair (region tasks
    only for samples already triaged ``ann``); a family's project is one project each.
    The state merges into ``<export_dir>/labelstudio_projects.json``, so a later call can add a
    project without recreating the others (and keeps the document root recorded there)."""
    known = project_names()
    bad = sorted(set(projects) - set(known))
    if bad or not projects:
        raise LabelStudioError(f"unknown projects {bad or '(none)'}; choose from {known}")
    export_dir = Path(export_dir).resolve()
    folders = {**extra_dirs(store), **(dirs or {}), CORE_PROJECT: export_dir}
    folders = {p: Path(folders[p]).resolve() for p in projects}
    f = export_dir / STATE_FILE
    state: dict[str, Any] = json.loads(f.read_text()) if f.is_file() else {}
    if document_root is None and state.get("document_root"):
        document_root = Path(state["document_root"])  # the running Label Studio's root
    if document_root is None:
        document_root = (
            export_dir
            if projects == (CORE_PROJECT,)
            else Path(os.path.commonpath(list(folders.values())))
        )
    root = Path(document_root).resolve()
    for p, d in folders.items():
        if not d.is_relative_to(root):
            raise LabelStudioError(
                f"the {p} export folder {d} is not under the document root {root}"
            )
    if CORE_PROJECT in projects:  # read every task file before creating anything
        triage = _tasks(export_dir, "triage_tasks.json")
    extra = annotation_projects()
    tasks = {k: _extra_tasks(folders[k], extra[k]) for k in projects if k in extra}
    ls = LabelStudio(url, token, client)
    state.update({"url": ls.url, "document_root": str(root)})
    if CORE_PROJECT in projects:
        state["safeimg_rel"] = os.path.relpath(export_dir, root)
        for key, title, xml in (
            ("triage", "forenset triage", TRIAGE_XML),
            ("bbox", "forenset regions", BBOX_XML),
        ):
            state[key] = ls.create_project(f"{title} ({store.root})"[:50], xml)
            ls.add_local_storage(state[key], export_dir / "images", f"{title} images")
        state["triage_tasks"] = ls.import_tasks(
            state["triage"], _rebase(triage, state["safeimg_rel"])
        )
        state["bbox_pushed"] = []
        state["bbox_tasks"] = _push_ann(ls, store, export_dir, state)
    for key, items in tasks.items():
        title, xml = extra[key].title, load_target(extra[key].xml)
        pid = ls.create_project(f"{title} ({store.root})"[:50], xml)
        ls.add_local_storage(pid, folders[key] / "images", f"{title} images")
        rel = os.path.relpath(folders[key], root)
        state[key] = {
            "id": pid,
            "dir": str(folders[key]),
            "tasks": ls.import_tasks(pid, _rebase(items, rel)),
        }
    export_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(f, json.dumps(state, indent=1))
    return state


def _extra_tasks(folder: Path, project: AnnotationProject) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in project.task_files:
        if not (folder / n).is_file():
            raise LabelStudioError(f"{folder / n} is missing: run `forenset {project.command}`")
        out += json.loads((folder / n).read_text())
    return out


def _pull_extra(
    ls: LabelStudio, store: RunStore, key: str, info: dict[str, Any], stamp: str
) -> dict[str, Any]:
    """Download one family project's JSON export next to its tasks and say what reads it."""
    pulled = Path(info["dir"]) / "pulled"
    raw = ls.export(int(info["id"]))
    write_atomic(pulled / f"{key}-{stamp}.json", raw)
    latest = pulled / f"{key}-export.json"  # a stable name for the build config
    write_atomic(latest, raw)
    doc = json.loads(raw)
    done = sum(
        1 for t in doc if any(not a.get("was_cancelled") for a in t.get("annotations") or [])
    )
    nxt = annotation_projects()[key].then.format(latest=latest, run=store.root)
    return {"path": str(latest), "tasks": len(doc), "annotated": done, "next": nxt}


def pull_annotations(
    store: RunStore, export_dir: Path, token: str, *, client: httpx.Client | None = None
) -> dict[str, Any]:
    """Export every project set up (all tasks, so deleted ones show): import the triage and
    regions into the run and push region tasks for samples newly triaged ``ann``; download the
    families' project exports into their folders with the command that reads each."""
    export_dir = Path(export_dir)
    f = export_dir / STATE_FILE
    if not f.is_file():
        raise LabelStudioError(f"{f} is missing: run `forenset labelstudio-setup` first")
    state = json.loads(f.read_text())
    ls = LabelStudio(state["url"], token, client)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out: dict[str, Any] = {}
    if "triage" in state:
        out.update(_pull_triage(ls, store, export_dir, state, stamp))
    for key in annotation_projects():
        if key in state:
            out[key] = _pull_extra(ls, store, key, state[key], stamp)
    write_atomic(f, json.dumps(state, indent=1))
    return out


def _pull_triage(
    ls: LabelStudio, store: RunStore, export_dir: Path, state: dict[str, Any], stamp: str
) -> dict[str, Any]:
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
    return out
