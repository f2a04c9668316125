"""The annotator and checker of bench/labelstudio_roundtrip.sh (talks to a real Label Studio).

Usage: labelstudio_annotate.py URL TOKEN EXPORT_DIR triage|regions|clue|check|checkclue [RUN_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx


def tasks(c: httpx.Client, url: str, project: int) -> list[dict]:
    r = c.get(f"{url}/api/tasks", params={"project": project, "page_size": 1000})
    r.raise_for_status()
    doc = r.json()
    return doc["tasks"] if isinstance(doc, dict) else doc


def annotate(c: httpx.Client, url: str, task: int, result: list[dict]) -> None:
    r = c.post(f"{url}/api/tasks/{task}/annotations", json={"result": result, "lead_time": 3.5})
    r.raise_for_status()


def main() -> None:
    url, token, export, step = sys.argv[1:5]
    state = json.loads((Path(export) / "labelstudio_projects.json").read_text())
    r = httpx.post(f"{url}/api/token/refresh/", json={"refresh": token}, timeout=60)
    r.raise_for_status()
    c = httpx.Client(headers={"Authorization": f"Bearer {r.json()['access']}"}, timeout=60)
    if step == "triage":
        ts = tasks(c, url, state["triage"])
        img = c.get(url + ts[0]["data"]["image"])
        print("image", ts[0]["data"]["image"], "->", img.status_code, len(img.content), "bytes")
        assert img.status_code == 200, "Local Files storage does not serve the image"
        for t, choice in zip(ts, ["ann", "hard", "invalid"], strict=False):
            annotate(
                c,
                url,
                t["id"],
                [
                    {
                        "from_name": "triage",
                        "to_name": "image",
                        "type": "choices",
                        "value": {"choices": [choice]},
                    }
                ],
            )
        c.delete(f"{url}/api/tasks/{ts[-1]['id']}").raise_for_status()  # deleted in LS
        print("triaged", min(3, len(ts)), "of", len(ts), "tasks; deleted task", ts[-1]["id"])
    elif step == "regions":
        preds = {
            t["data"]["sample_id"]: t["predictions"]
            for t in json.loads((Path(export) / "bbox_tasks.json").read_text())
        }
        for t in tasks(c, url, state["bbox"]):
            res = []
            for p in preds.get(t["data"]["sample_id"], [])[:1]:
                for r in p["result"][:1]:
                    r = {**r, "origin": "prediction"}
                    r["value"] = {**r["value"], "rotation": 15}
                    res.append(r)
                    res.append(
                        {
                            "id": r["id"],
                            "from_name": "why",
                            "to_name": "image",
                            "type": "textarea",
                            "value": {
                                **r["value"],
                                "text": ["edge of the patch does not follow the object"],
                            },
                        }
                    )
            res.append(
                {
                    "id": "drawn1",
                    "from_name": "anomaly",
                    "to_name": "image",
                    "type": "rectanglelabels",
                    "original_width": 96,
                    "original_height": 96,
                    "value": {
                        "x": 10,
                        "y": 10,
                        "width": 20,
                        "height": 20,
                        "rotation": 0,
                        "rectanglelabels": ["physics"],
                    },
                }
            )
            res.append(
                {
                    "id": "drawn1",
                    "from_name": "why",
                    "to_name": "image",
                    "type": "textarea",
                    "value": {
                        "x": 10,
                        "y": 10,
                        "width": 20,
                        "height": 20,
                        "rotation": 0,
                        "text": ["shadow falls towards the light"],
                    },
                }
            )
            annotate(c, url, t["id"], res)
        print("annotated regions")
    elif step == "clue":  # a person edits one golden clue in the FakeClue project
        ts = tasks(c, url, state["fakeclue"]["id"])
        img = c.get(url + ts[0]["data"]["image"])
        print("image", ts[0]["data"]["image"], "->", img.status_code, len(img.content), "bytes")
        assert img.status_code == 200, "Local Files storage does not serve the FakeClue image"
        text = "Edited in Label Studio: the object's outline is blurred against the background."
        result = [
            {
                "from_name": "golden_clue",
                "to_name": "image",
                "type": "textarea",
                "value": {"text": [text]},
            }
        ]
        annotate(c, url, ts[0]["id"], result)
        edit = {"sample_id": ts[0]["data"]["sample_id"], "text": text}
        (Path(export) / "clue_edit.json").write_text(json.dumps(edit))
        print("edited the clue of", edit["sample_id"], "of", len(ts), "FakeClue tasks")
    elif step == "checkclue":
        from forenset.store.run_store import RunStore
        from forenset.store.views import connect

        edit = json.loads((Path(export) / "clue_edit.json").read_text())
        con = connect(RunStore(sys.argv[5]), ["fakebench_items"])
        rows = con.execute(
            "SELECT sample_id, golden_source, answer FROM fakebench_items "
            "WHERE task = 'fakeclue' AND status = 'ok'"
        ).fetchall()
        for r in rows:
            print(r)
        got = {s: (g, a) for s, g, a in rows}
        assert got[edit["sample_id"]] == ("human-edited", edit["text"]), got[edit["sample_id"]]
        assert all(g != "human-edited" for s, (g, _) in got.items() if s != edit["sample_id"])
        print("the edited clue is the golden clue of", edit["sample_id"])
    else:
        from forenset.store.run_store import RunStore
        from forenset.store.views import connect

        con = connect(RunStore(sys.argv[5]), ["annotations"])
        q = (
            "SELECT task, choice, rect_label, round(rotation, 1), origin, region_id, "
            "difference_id, region_text, lead_time, status, error FROM annotations ORDER BY 1, 2"
        )
        rows = con.execute(q).fetchall()
        for r in rows:
            print(r)
        tri = sorted(r[1] for r in rows if r[0] == "triage")
        boxes = [r for r in rows if r[0] == "bbox"]
        assert tri == ["ann", "hard", "invalid"][: len(tri)] and len(tri) >= 2, tri
        assert any(r[4] == "drawn" and r[7] == "shadow falls towards the light" for r in boxes)
        assert any(r[4] == "prediction" and r[3] == 15.0 and r[6] for r in boxes) or not any(
            r[4] == "prediction" for r in boxes
        )
        assert any("deleted in Label Studio" in (r[10] or "") for r in rows), "deleted task"
        print("checked", len(rows), "annotation rows")


if __name__ == "__main__":
    main()
