"""The cluster recipes of docs/cluster.md, checked as far as this machine allows.

prefect.yaml (process pools, as written) runs end to end in tests/integration/test_deployment.py.
Here, without a server: its entrypoints import from the installed package (no pull step, no
/app), and the Kubernetes GPU job template renders, with a stage's ``resources`` as job
variables, into a pod spec that asks for them. No Kubernetes or Docker runs here: the
rendered manifest is checked, not applied."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from forenset.config import validate_config

REPO = Path(__file__).resolve().parents[2]


def test_prefect_yaml_deployments_load_from_the_installed_package():
    from prefect.flows import load_flow_from_entrypoint

    doc = yaml.safe_load((REPO / "prefect.yaml").read_text())
    assert doc["pull"] == []  # a pull step to /app crashed every process-pool run
    names = set()
    for dep in doc["deployments"]:
        entry = dep["entrypoint"]
        assert ".py" not in entry, entry  # module paths: any working directory will do
        flow = load_flow_from_entrypoint(entry)
        names.add(f"{flow.name}/{dep['name']}")
        # process pools have no `image` variable: it was silently ignored there
        assert "image" not in (dep["work_pool"].get("job_variables") or {})
    assert {"forenset-build/build", "forenset-shards/gpu", "forenset-shards/cpu"} <= names
    example = yaml.safe_load((REPO / "examples" / "cluster.yaml").read_text())
    for stage, rc in (example.get("runners") or {}).items():
        if rc.get("kind") == "deployment":
            assert rc["deployment"] in names, (stage, rc["deployment"])


def render(template: dict, job_variables: dict) -> dict:
    """What a Prefect worker does with a pool's base job template: defaults of ``variables``
    overlaid with the run's job variables, substituted into ``job_configuration``."""
    from prefect.utilities.templating import apply_values

    values = {
        k: v["default"] for k, v in template["variables"]["properties"].items() if "default" in v
    }
    values.update(job_variables)
    return apply_values(template["job_configuration"], values)


def test_kubernetes_gpu_template_asks_for_the_stage_resources():
    from forenset.flows.deploy import DeploymentDispatcher  # noqa: F401 - the module that sends them

    template = json.loads((REPO / "deploy/kubernetes/gpu-base-job-template.json").read_text())
    cfg = validate_config(
        {
            "runners": {
                "candidates": {
                    "kind": "deployment",
                    "deployment": "forenset-shards/gpu",
                    "resources": {"gpus": 2, "cpus": 16, "memory": "96Gi"},
                }
            }
        }
    )
    jv = cfg.runner_for("candidates").resources.job_variables()
    job = render(template, {**jv, "image": "registry/forenset:1.2"})
    (container,) = job["job_manifest"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry/forenset:1.2"
    assert container["resources"] == {
        "limits": {"nvidia.com/gpu": 2, "memory": "96Gi"},
        "requests": {"cpu": 16, "memory": "96Gi"},
    }
    assert container["env"] == {"OMP_NUM_THREADS": "1"}
    # every variable forenset sends is declared by the template (a pool rejects unknown ones)
    assert set(jv) <= set(template["variables"]["properties"])
    # without resources the template's defaults apply: one GPU
    job = render(template, {})
    limits = job["job_manifest"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert limits["limits"]["nvidia.com/gpu"] == 1
