"""KubeRay manifests (RayCluster, RayJob, RayService): the cluster they describe, and the project's rules for them.

`nodes_of_manifest` turns a manifest's cluster spec into the largest cluster it can scale to (the head once, every
worker group at `maxReplicas` x `numOfHosts`), for `t2rag plan --cluster`. A pod's Ray resources are what KubeRay
gives `ray start`: `num-cpus`/`num-gpus` from `rayStartParams` when set, else the container's CPU and
`nvidia.com/gpu` limits; the GPU type is the GPU Feature Discovery label its `nodeSelector` asks for
(`nvidia.com/gpu.product`, e.g. NVIDIA-H100-80GB-HBM3), which is what Ray's own detection reports on that node.

`check_manifest` holds a manifest to the rules `cluster.yaml` meets (`ray_jobs.cluster_file`): the image's Python,
Ray and vLLM are the project's pins, the project is installed at a pinned ref, the versions are checked before a
job runs, the dashboard is not exposed outside the cluster, and no credential is written in the file (S3 through
the pods' service account, the served API key from a Secret).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ray_jobs.capacity import Node
from ray_jobs.cluster_file import MOVING_REFS, PROJECT_INSTALL, ProjectPins, image_problems
from t2rag.errors import ConfigError

API_VERSION = "ray.io/v1"
#: Where each kind keeps its RayCluster spec.
CLUSTER_SPEC = {"RayCluster": (), "RayJob": ("rayClusterSpec",), "RayService": ("rayClusterConfig",)}
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Head services that reach outside the cluster (the dashboard runs jobs: it must stay inside).
EXPOSED_SERVICE_TYPES = {"LoadBalancer", "NodePort"}
CREDENTIAL_ENV = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
API_KEY_ENV = "T2RAG_API_KEY"


def is_manifest(path: str | Path) -> bool:
    """Whether the file holds a KubeRay resource (else it is taken for a Ray cluster launcher file)."""
    try:
        return any(_is_ray_resource(d) for d in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError):
        return False


def _is_ray_resource(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("apiVersion") == API_VERSION and doc.get("kind") in CLUSTER_SPEC


def load_manifest(path: str | Path) -> dict:
    """The file's KubeRay resource (the first; other documents such as a ServiceAccount are skipped)."""
    try:
        docs = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable manifest ({str(exc).splitlines()[0]})") from None
    found = [d for d in docs if _is_ray_resource(d)]
    if not found:
        kinds = ", ".join(CLUSTER_SPEC)
        raise ConfigError(f"{path}: no KubeRay resource ({API_VERSION} {kinds})")
    doc = found[0]
    spec = cluster_spec(doc)
    if not isinstance(spec.get("headGroupSpec"), dict):
        raise ConfigError(f"{path}: {doc['kind']} has no cluster spec with a headGroupSpec")
    return doc


def cluster_spec(doc: dict) -> dict:
    """The RayCluster spec inside a RayCluster, RayJob or RayService."""
    spec = doc.get("spec") or {}
    for key in CLUSTER_SPEC[doc["kind"]]:
        spec = spec.get(key) or {}
    return spec


def nodes_of_manifest(doc: dict, max_workers: int | None = None) -> list[Node]:
    """The largest cluster the manifest can scale to, larger worker pods first, with at most `max_workers`
    worker pods in all when given."""
    spec = cluster_spec(doc)
    nodes = [_node("head", spec["headGroupSpec"])]
    groups = sorted(spec.get("workerGroupSpecs") or [], key=lambda g: _ray_resources(g)[::-1], reverse=True)
    budget = max_workers
    for group in groups:
        count = int(group.get("maxReplicas", group.get("replicas", 0))) * int(group.get("numOfHosts", 1))
        if budget is not None:
            count = min(count, budget)
            budget -= count
        nodes += [_node(f"{group.get('groupName', 'workers')} #{i + 1}", group) for i in range(count)]
    return nodes


def _node(name: str, group: dict) -> Node:
    cpus, gpus = _ray_resources(group)
    return Node(name, cpus, gpus, _accelerator(group))


def _ray_resources(group: dict) -> tuple[float, float]:
    params = group.get("rayStartParams") or {}
    limits = _ray_container(group).get("resources") or {}
    amounts = {**(limits.get("requests") or {}), **(limits.get("limits") or {})}
    cpus = params.get("num-cpus", amounts.get("cpu", 0))
    gpus = params.get("num-gpus", amounts.get(GPU_RESOURCE, 0))
    return cpu_quantity(cpus), float(gpus)


def _ray_container(group: dict) -> dict:
    """The Ray container of a group's pod: KubeRay runs Ray in the first container."""
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return containers[0]


def _accelerator(group: dict) -> str | None:
    product = (((group.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}).get(GPU_PRODUCT_LABEL)
    if not product:
        return None
    match = re.match(r"(?:NVIDIA-)?([A-Z]+\d+[A-Z]*)", str(product))
    return match.group(1) if match else None


def cpu_quantity(value: object) -> float:
    """A Kubernetes CPU quantity ("16", "500m", 2.5) in CPUs."""
    text = str(value).strip()
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        raise ConfigError(f"not a CPU quantity: {value!r}") from None


def check_manifest(doc: dict, pins: ProjectPins | None = None) -> list[str]:
    """Every rule of the project the manifest breaks, one line each (empty when it keeps them all)."""
    pins = pins or ProjectPins.installed()
    spec = cluster_spec(doc)
    groups = [("head", spec["headGroupSpec"])]
    groups += [(g.get("groupName", "workers"), g) for g in spec.get("workerGroupSpecs") or []]
    pods = [(name, (g.get("template") or {}).get("spec") or {}) for name, g in groups]
    images = {c.get("image") for _, pod in pods for c in pod.get("containers") or []}
    problems = image_problems(images - {None}, pins)
    text = yaml.safe_dump(doc)
    installs = [m.group("ref") for m in PROJECT_INSTALL.finditer(text)]
    if not installs:
        problems.append('nothing installs the project (a runtime_env pip of "t2rag[gpu] @ git+...@<tag>")')
    problems += [f"the project is installed from the moving ref '{r}': pin a tag or commit" for r in installs
                 if r in MOVING_REFS]  # fmt: skip
    if doc["kind"] == "RayJob" and "ray_jobs.node_check" not in str(doc["spec"].get("entrypoint", "")):
        problems.append("the entrypoint does not run `python -m ray_jobs.node_check` first (versions unchecked)")
    head = spec["headGroupSpec"]
    exposed = head.get("serviceType") in EXPOSED_SERVICE_TYPES or head.get("enableIngress")
    if exposed or ((head.get("headService") or {}).get("spec") or {}).get("type") in EXPOSED_SERVICE_TYPES:
        problems.append("the head service reaches outside the cluster (the dashboard runs jobs): keep ClusterIP "
                        "and use `kubectl port-forward`")  # fmt: skip
    for name, pod in pods:
        if not pod.get("serviceAccountName"):
            problems.append(f"{name}: no serviceAccountName (S3 access comes from the pod's service account)")
        for container in pod.get("containers") or []:
            env = {e.get("name"): e for e in container.get("env") or []}
            problems += [f"{name}: {key} is written in the file; use the service account's role" for key in
                         sorted(CREDENTIAL_ENV & env.keys())]  # fmt: skip
            if doc["kind"] == "RayService" and "secretKeyRef" not in (env.get(API_KEY_ENV) or {}).get("valueFrom", {}):
                problems.append(f"{name}: {API_KEY_ENV} does not come from a Secret (secretKeyRef)")
    return problems
