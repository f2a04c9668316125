"""labelstudio-setup / -pull against a fake Label Studio at the HTTP edge (httpx transport)."""

from __future__ import annotations

import json

import httpx

from forenset.exports.api import run_export
from forenset.exports.labelstudio_api import pull_annotations, setup_projects
from forenset.store.views import connect


class FakeLS:
    """Projects, storages and tasks in memory; exports return what annotators 'did'."""

    def __init__(self):
        self.projects, self.storages, self.tasks, self.auth = {}, [], {}, []
        self.answers = {}  # sample_id -> result list

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.auth.append(req.headers.get("Authorization"))
        p = req.url.path.rstrip("/")
        if p == "/api/token/refresh":
            return httpx.Response(200, json={"access": "ACCESS"})
        if p == "/api/projects" and req.method == "POST":
            pid = len(self.projects) + 1
            self.projects[pid] = json.loads(req.content)
            self.tasks[pid] = []
            return httpx.Response(201, json={"id": pid})
        if p == "/api/storages/localfiles":
            self.storages.append(json.loads(req.content))
            return httpx.Response(201, json={"id": len(self.storages)})
        pid = int(p.split("/")[3])
        if p.endswith("/import"):
            new = json.loads(req.content)
            self.tasks[pid] += new
            return httpx.Response(201, json={"task_count": len(new)})
        if p.endswith("/export"):
            assert req.url.params["exportType"] == "JSON"
            out = []
            for i, t in enumerate(self.tasks[pid]):
                res = self.answers.get((pid, t["data"]["sample_id"]), [])
                anns = [{"id": i, "result": res, "completed_by": 1}] if res else []
                out.append({"id": i + 1, "data": t["data"], "annotations": anns})
            return httpx.Response(200, json=out)
        return httpx.Response(404, json={"detail": "not found"})


def test_setup_pull_pushes_region_tasks_only_for_ann(built, samples, tmp_path):
    store, _ = built
    store.write_manifest("annotations", [])  # other tests of the shared build imported some
    out = tmp_path / "ls"
    run_export(store, "labelstudio", out, samples=samples)
    fake = FakeLS()
    client = httpx.Client(transport=httpx.MockTransport(fake))
    state = setup_projects(store, out, "http://ls.test", "a.b.c", client=client)
    assert fake.auth[0] is None and fake.auth[-1] == "Bearer ACCESS"  # PAT exchanged once
    assert [s["project"] for s in fake.storages] == [state["triage"], state["bbox"]]
    assert all(s["path"] == str((out / "images").resolve()) for s in fake.storages)
    fakes = [s["sample_id"] for s in samples if s["label"] == "fake"]
    assert len(fake.tasks[state["triage"]]) == len(fakes) and not fake.tasks[state["bbox"]]

    tri = {"from_name": "triage", "to_name": "image", "type": "choices"}
    fake.answers[(state["triage"], fakes[0])] = [{**tri, "value": {"choices": ["ann"]}}]
    fake.answers[(state["triage"], fakes[1])] = [{**tri, "value": {"choices": ["hard"]}}]
    res = pull_annotations(store, out, "tok", client=client)
    assert res["triage"] == {"ok": 2, "error": 0} and res["pushed_region_tasks"] == 1
    assert [t["data"]["sample_id"] for t in fake.tasks[state["bbox"]]] == [fakes[0]]
    assert fake.auth[-1] == "Token tok"

    box = {
        "id": "r1",
        "from_name": "anomaly",
        "to_name": "image",
        "type": "rectanglelabels",
        "value": {
            "x": 5,
            "y": 5,
            "width": 10,
            "height": 10,
            "rotation": 30,
            "rectanglelabels": ["hands"],
        },
    }
    fake.answers[(state["bbox"], fakes[0])] = [box]
    fake.tasks[state["triage"]].pop()  # a task deleted in Label Studio
    res = pull_annotations(store, out, "tok", client=client)
    assert res["regions"] == {"ok": 1, "error": 0} and res["pushed_region_tasks"] == 0
    assert res["triage"]["error"] == 1
    con = connect(store, ["annotations"])
    assert con.execute(
        "SELECT sample_id, rect_label, rotation FROM annotations WHERE task = 'bbox'"
    ).fetchall() == [(fakes[0], "hands", 30.0)]


def test_cli_needs_a_token_and_a_setup(built, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from forenset.exports.cli import app

    store, _ = built
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    r = CliRunner().invoke(app, ["labelstudio-setup", store.uri, "--export-dir", str(tmp_path)])
    assert r.exit_code == 2 and "LABEL_STUDIO_API_KEY" in r.output
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "tok")
    r = CliRunner().invoke(app, ["labelstudio-pull", store.uri, "--export-dir", str(tmp_path)])
    assert r.exit_code == 2 and "labelstudio-setup" in r.output
