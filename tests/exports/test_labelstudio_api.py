"""labelstudio-setup / -pull against a fake Label Studio at the HTTP edge (httpx transport)."""

from __future__ import annotations

import json

import httpx
import pytest

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
    r = CliRunner().invoke(
        app, ["labelstudio-setup", store.uri, "--export-dir", str(tmp_path), "--projects", "qa"]
    )
    assert r.exit_code == 2 and "unknown projects ['qa']" in r.output


def test_setup_fakeclue_and_gold_projects_and_pull_their_exports(built, samples, tmp_path):
    from forenset.benchmarks.evaluation.gold import CONTROL, export_gold, fake_ids, gold_rows
    from forenset.benchmarks.fakebench.bench_export import export_clue_task
    from forenset.benchmarks.fakebench.text import CLUE_FIELD, read_clue_edits
    from forenset.exports.labelstudio_api import LabelStudioError

    store, _ = built
    ls_dir, fc_dir, gold_dir = tmp_path / "ls", tmp_path / "fb" / "labelstudio", tmp_path / "gold"
    run_export(store, "labelstudio", ls_dir, samples=samples)
    n_clue = export_clue_task(store, fc_dir)["counts"]["tasks"]
    g = export_gold(store, samples, gold_dir, n=2, overlap=1, split=None)["counts"]
    fake = FakeLS()
    client = httpx.Client(transport=httpx.MockTransport(fake))
    dirs = {"fakeclue": fc_dir, "gold": gold_dir}
    state = setup_projects(store, ls_dir, "http://ls.test", "tok", client=client,
                           projects=("fakeclue", "gold"), dirs=dirs)  # fmt: skip
    assert "triage" not in state and state["document_root"] == str(tmp_path.resolve())
    fc, gd = state["fakeclue"]["id"], state["gold"]["id"]
    assert [fake.projects[p]["label_config"].count(f'name="{c}"') for p, c in
            ((fc, CLUE_FIELD), (gd, CONTROL))] == [1, 1]  # fmt: skip
    assert [s["path"] for s in fake.storages] == [
        str((fc_dir / "images").resolve()), str((gold_dir / "images").resolve())]  # fmt: skip
    assert len(fake.tasks[fc]) == n_clue and len(fake.tasks[gd]) == g["tasks"] + g["overlap"]
    # URLs rebased onto the common document root, and the files are really there
    for t in fake.tasks[fc] + fake.tasks[gd]:
        for k in ("image", "edited", "original"):
            if k in t["data"]:
                rel = t["data"][k].split("?d=", 1)[1]
                assert rel.startswith(("fb/labelstudio/images/", "gold/images/")), rel
                assert (tmp_path / rel).is_file()
    assert fake.tasks[fc][0]["predictions"]  # the golden clue travels as a prediction

    # a later call adds the SafeIMG pair, keeping the other projects in the state file
    with pytest.raises(LabelStudioError, match="not under the document root"):
        setup_projects(store, ls_dir, "http://ls.test", "tok", client=client,
                       projects=("safeimg", "gold"), dirs=dirs, document_root=gold_dir)  # fmt: skip
    with pytest.raises(LabelStudioError, match="unknown projects"):
        setup_projects(store, ls_dir, "http://ls.test", "tok", client=client, projects=("qa",))
    store.write_manifest("annotations", [])
    again = setup_projects(store, ls_dir, "http://ls.test", "tok", client=client)
    assert again["fakeclue"]["id"] == fc and again["triage"] not in (fc, gd)
    # the same document root as the projects already set up: URLs rebased onto it too
    assert again["document_root"] == state["document_root"]
    rel = fake.tasks[again["triage"]][0]["data"]["image"].split("?d=", 1)[1]
    assert rel.startswith("ls/images/") and (tmp_path / rel).is_file()

    sid = fake.tasks[fc][0]["data"]["sample_id"]
    clue = {"from_name": CLUE_FIELD, "to_name": "image", "type": "textarea"}
    fake.answers[(fc, sid)] = [{**clue, "value": {"text": ["An edited clue."]}}]
    gsid = fake.tasks[gd][0]["data"]["sample_id"]
    expl = {"from_name": CONTROL, "to_name": "edited", "type": "textarea"}
    fake.answers[(gd, gsid)] = [{**expl, "value": {"text": ["The hand has six fingers."]}}]
    res = pull_annotations(store, ls_dir, "tok", client=client)
    assert res["triage"] == {"ok": 0, "error": 0}
    assert res["fakeclue"]["annotated"] == 1 and res["fakeclue"]["tasks"] == n_clue
    assert f"clue_edits: {res['fakeclue']['path']}" in res["fakeclue"]["next"]
    assert read_clue_edits(open(res["fakeclue"]["path"]).read()) == {sid: "An edited clue."}
    assert res["gold"]["next"] == f"forenset import-gold {store.root} {res['gold']['path']}"
    doc = json.loads(open(res["gold"]["path"]).read())
    ok = [r for r in gold_rows(doc, fake_ids(store), "h") if r["status"] == "ok"]
    assert [r["sample_id"] for r in ok] == [gsid]
