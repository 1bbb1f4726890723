"""The KubeRay manifests under deploy/kubernetes/: KubeRay's v1 fields only, the rules cluster.yaml meets, and the
paper's configs placed on their clusters by `t2rag plan --cluster`."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from ray_jobs.cluster_file import ProjectPins
from ray_jobs.kuberay import check_manifest, cluster_spec, cpu_quantity, is_manifest, load_manifest, nodes_of_manifest
from t2rag.cli import main
from tests.ray_jobs.kuberay_crds import schema, unknown_fields

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy/kubernetes"
MANIFESTS = sorted(p.name for p in DEPLOY.glob("ray*.yaml"))
PINS = ProjectPins.from_pyproject(ROOT / "pyproject.toml")
SAMPLE_DATA = ["--data", str(ROOT / "t2rag/sample"), "--subsets", "FinQA,TAT-DQA"]


def test_the_manifests_are_a_rayjob_per_paper_config_and_a_rayservice():
    kinds = {name: load_manifest(DEPLOY / name)["kind"] for name in MANIFESTS}
    assert kinds == {"rayjob-paper-table3.yaml": "RayJob", "rayjob-paper-table3-4nodes.yaml": "RayJob",
                     "rayservice-rag.yaml": "RayService"}  # fmt: skip


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_field_is_kuberays_v1_and_valid_there(name):
    doc = load_manifest(DEPLOY / name)
    assert unknown_fields(doc, schema(doc["kind"])) == []
    jsonschema.validate(doc, schema(doc["kind"]))  # types, enums and required fields of the CRD


def test_a_misspelt_or_misplaced_field_is_found():
    doc = load_manifest(DEPLOY / "rayjob-paper-table3.yaml")
    doc["spec"]["shutdownAfterJobFinish"] = True  # the real one ends in "Finishes"
    doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplica"] = 2
    doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resource"] = {}
    assert sorted(unknown_fields(doc, schema("RayJob"))) == [
        "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resource",
        "spec.rayClusterSpec.workerGroupSpecs[0].maxReplica",
        "spec.shutdownAfterJobFinish",
    ]


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_manifests_keep_the_projects_rules(name):
    assert check_manifest(load_manifest(DEPLOY / name), PINS) == []


def test_the_rayjobs_run_the_paper_configs_resubmitting_and_cleaning_up():
    for name, config in (("rayjob-paper-table3.yaml", "configs/paper_table3.yaml"),
                         ("rayjob-paper-table3-4nodes.yaml", "configs/paper_table3_4nodes.yaml")):  # fmt: skip
        spec = load_manifest(DEPLOY / name)["spec"]
        assert spec["entrypoint"].split() == ["python", "-m", "ray_jobs.node_check", "&&", "python", "-m",
                                              "ray_jobs.evaluate", "--config", config]  # fmt: skip
        assert (ROOT / config).is_file()
        assert spec["backoffLimit"] >= 1 and spec["shutdownAfterJobFinishes"] is True
        env = yaml.safe_load(spec["runtimeEnvYAML"])
        assert env["working_dir"].endswith("/v0.1.0.zip") and env["pip"][0].endswith("@v0.1.0")


def test_the_rayservice_serves_the_apps_config_with_the_best_retriever():
    from ray.serve.schema import ServeDeploySchema

    from serve.settings import ServeSettings

    spec = load_manifest(DEPLOY / "rayservice-rag.yaml")["spec"]
    serve_config = ServeDeploySchema.model_validate(yaml.safe_load(spec["serveConfigV2"]))  # Ray's own schema
    (app,) = serve_config.applications
    assert app.import_path == yaml.safe_load((ROOT / "serve/config.yaml").read_text())["applications"][0]["import_path"]
    settings = ServeSettings.parse({**app.args, "api_key": "x"})
    config = settings.run_config()
    served = [m.name for m in settings.served_methods(config)]
    assert "bm25_focus" in served and config.generator.engine == "vllm"
    assert spec["upgradeStrategy"]["type"] == "NewCluster"


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: _head(d).update(serviceType="LoadBalancer"), "the head service reaches outside the cluster"),
        (lambda d: _head(d).update(enableIngress=True), "the head service reaches outside the cluster"),
        (lambda d: _head_pod(d).pop("serviceAccountName"), "head: no serviceAccountName"),
        (lambda d: _head_pod(d)["containers"][0].update(env=[{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]),
         "head: AWS_SECRET_ACCESS_KEY is written in the file"),
        (lambda d: _head_pod(d)["containers"][0].update(image="rayproject/ray-llm:2.59.0-py311-cu128"),
         "Ray 2.59.0, but the project pins ray==2.60.0"),
        (lambda d: _head_pod(d)["containers"][0].update(image="rayproject/ray:2.60.0-py311-cu128"),
         "no vLLM in it"),
        (lambda d: d["spec"].update(runtimeEnvYAML=d["spec"]["runtimeEnvYAML"].replace("git@v0.1.0", "git@main")),
         "moving ref 'main'"),
        (lambda d: d["spec"].update(runtimeEnvYAML="pip: [lancedb]"), "nothing installs the project"),
        (lambda d: d["spec"].update(entrypoint="python -m ray_jobs.evaluate --config c.yaml"), "node_check"),
    ],
)  # fmt: skip
def test_each_rule_is_enforced(change, problem):
    doc = copy.deepcopy(load_manifest(DEPLOY / "rayjob-paper-table3.yaml"))
    change(doc)
    problems = check_manifest(doc, PINS)
    assert problems and problem in problems[0]


def test_the_served_api_key_must_come_from_a_secret():
    doc = load_manifest(DEPLOY / "rayservice-rag.yaml")
    worker = cluster_spec(doc)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "T2RAG_API_KEY", "value": "secret"}]
    assert check_manifest(doc, PINS) == ["gpu-h100: T2RAG_API_KEY does not come from a Secret (secretKeyRef)"]


def _head(doc: dict) -> dict:
    return cluster_spec(doc)["headGroupSpec"]


def _head_pod(doc: dict) -> dict:
    return _head(doc)["template"]["spec"]


def test_nodes_are_the_pods_ray_start_sees_at_their_largest():
    doc = load_manifest(DEPLOY / "rayjob-paper-table3-4nodes.yaml")
    nodes = nodes_of_manifest(doc)
    assert [(n.cpus, n.gpus, n.accelerator) for n in nodes] == [(0, 0, None)] + [(184, 8, "H100")] * 4
    assert len(nodes_of_manifest(doc, max_workers=2)) == 3
    group = cluster_spec(doc)["workerGroupSpecs"][0]
    group.update(numOfHosts=2, rayStartParams={"num-cpus": "96", "num-gpus": "4"})
    group["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
    assert [(n.cpus, n.gpus, n.accelerator) for n in nodes_of_manifest(doc)[1:]] == [(96, 4, "A100")] * 8
    assert [cpu_quantity(q) for q in ("16", "500m", 2.5)] == [16, 0.5, 2.5]


def test_a_launcher_file_is_not_a_manifest(tmp_path):
    assert not is_manifest(ROOT / "cluster.yaml") and is_manifest(DEPLOY / "rayservice-rag.yaml")
    other = tmp_path / "svc.yaml"
    other.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    assert not is_manifest(other)


@pytest.mark.parametrize(
    "config, manifest, workers",
    [
        ("paper_table3.yaml", "rayjob-paper-table3.yaml", 1),
        ("paper_table3_4nodes.yaml", "rayjob-paper-table3-4nodes.yaml", 4),
    ],
)
def test_plan_fits_the_rayjob_and_refuses_it_one_gpu_worker_short(capsys, tmp_path, config, manifest, workers):
    args = ["plan", "--config", str(ROOT / "configs" / config), *SAMPLE_DATA, "--json"]
    assert main([*args, "--cluster", str(DEPLOY / manifest)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] is True and len(plan["target"]["nodes"]) == 1 + workers
    # The same manifest with one GPU worker fewer.
    doc = yaml.safe_load((DEPLOY / manifest).read_text())
    group = doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["replicas"] = group["minReplicas"] = group["maxReplicas"] = workers - 1
    smaller = tmp_path / manifest
    smaller.write_text(yaml.safe_dump(doc))
    assert main([*args, "--cluster", str(smaller)]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["fits"] is False
    assert err.startswith("t2rag: error: the run cannot be placed: the run pool 'generate (vllm")
