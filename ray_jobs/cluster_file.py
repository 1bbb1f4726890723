"""A Ray cluster launcher file (`cluster.yaml`), checked before `ray up` meets it.

`check_cluster_file` runs Ray's own validator (what `ray up` runs before any cloud call) and then what the schema
cannot see: the container image's Python satisfies the project's `requires-python`, its Ray and vLLM are the
project's pins, the project is installed at a pinned ref, the dashboard stays on loopback, and every node type
declares the resources the configs ask for. `nodes_of` turns the file into the largest cluster it can scale to,
for `t2rag plan --cluster`.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ray_jobs.capacity import Node
from t2rag.errors import ConfigError

#: Ray's images: rayproject/ray or rayproject/ray-llm, tagged <ray version>-py<python>[-<platform>].
IMAGE_TAG = re.compile(r"^rayproject/(?P<kind>ray|ray-llm):(?P<ray>\d+\.\d+\.\d+)-py(?P<py>\d)(?P<minor>\d+)(?:-.+)?$")
#: A pip install of the project from git, and the ref it installs.
PROJECT_INSTALL = re.compile(r"t2rag(\[[^\]]*\])?\s*@\s*git\+\S+?@(?P<ref>[^\s\"']+)")
#: Refs that move: installing from them makes every node's code whatever the branch holds that day.
MOVING_REFS = {"main", "master", "HEAD", "develop", "dev"}


@dataclass(frozen=True)
class ProjectPins:
    """What the project requires of a node: its Python range and the exact Ray and vLLM of its `gpu` extra."""

    requires_python: str
    ray: str | None
    vllm: str | None
    vllm_of_ray_llm: str | None  # the vLLM that ray[llm] pins for that Ray (read from the installed Ray)

    @classmethod
    def installed(cls) -> ProjectPins:
        """The pins of the installed t2rag (its package metadata)."""
        meta = importlib.metadata.metadata("t2rag")
        requires = importlib.metadata.requires("t2rag") or []
        return cls(meta["Requires-Python"] or "", *_gpu_pins(requires), _vllm_of_ray_llm())

    @classmethod
    def from_pyproject(cls, path: str | Path) -> ProjectPins:
        import tomllib

        project = tomllib.loads(Path(path).read_text())["project"]
        requires = [f"{r}; extra == 'gpu'" for r in project.get("optional-dependencies", {}).get("gpu", [])]
        return cls(project.get("requires-python", ""), *_gpu_pins(requires), _vllm_of_ray_llm())


def _gpu_pins(requires: list[str]) -> tuple[str | None, str | None]:
    pins: dict[str, str | None] = {"ray": None, "vllm": None}
    for line in requires:
        req = Requirement(line)
        if req.name in pins and req.marker is not None and req.marker.evaluate({"extra": "gpu"}):
            exact = [s.version for s in req.specifier if s.operator == "=="]
            pins[req.name] = exact[0] if exact else None
    return pins["ray"], pins["vllm"]


def _vllm_of_ray_llm() -> str | None:
    try:
        requires = importlib.metadata.requires("ray") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in requires:
        req = Requirement(line)
        if req.name == "vllm" and req.marker is not None and req.marker.evaluate({"extra": "llm"}):
            exact = [s.version for s in req.specifier if s.operator == "=="]
            return exact[0] if exact else None
    return None


def load_cluster_file(path: str | Path) -> dict:
    """The file as a mapping, after Ray's own validation (`ray up` runs the same before any cloud call)."""
    from ray_jobs.ray_private import validate_cluster_config

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable cluster file ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a cluster file is a mapping")
    try:
        validate_cluster_config(raw)
    except Exception as exc:  # jsonschema's ValidationError, or Ray's ValueError for inconsistent node types
        raise ConfigError(f"{path}: Ray's cluster validator refused it: {str(exc).splitlines()[0]}") from None
    return raw


def check_cluster_file(path: str | Path, pins: ProjectPins | None = None) -> list[str]:
    """Ray's validation (an error when it fails), then every problem the schema cannot see, one line each."""
    cluster = load_cluster_file(path)
    pins = pins or ProjectPins.installed()
    docker = cluster.get("docker") or {}
    problems = image_problems({docker.get(k) for k in ("image", "head_image", "worker_image")} - {None}, pins)
    commands = [c for key in ("setup_commands", "head_setup_commands", "worker_setup_commands")
                for c in cluster.get(key) or []]  # fmt: skip
    installs = [m.group("ref") for c in commands for m in PROJECT_INSTALL.finditer(c)]
    if not installs:
        problems.append('no setup command installs the project (pip install "t2rag[gpu] @ git+...@<tag>")')
    problems += [f"the project is installed from the moving ref '{r}': pin a tag or commit" for r in installs
                 if r in MOVING_REFS]  # fmt: skip
    if not any("ray_jobs.node_check" in c for c in commands):
        problems.append("no setup command runs `python -m ray_jobs.node_check` (versions unchecked at boot)")
    for command in cluster.get("head_start_ray_commands") or []:
        host = re.search(r"--dashboard-host[= ](\S+)", command)
        if host and host.group(1) not in ("127.0.0.1", "localhost"):
            problems.append(f"the dashboard listens on {host.group(1)}: keep it on 127.0.0.1 and use `ray dashboard`")
    return problems


def image_problems(images: set[str], pins: ProjectPins) -> list[str]:
    """What the container images' tags say against the project's pins (Python, Ray, the vLLM of ray-llm)."""
    if not images:
        return ["no container image: nodes would run the host image's Python, Ray and vLLM"]
    problems = []
    for image in sorted(images):
        tag = IMAGE_TAG.match(image)
        if tag is None:
            problems.append(f"image {image}: not a rayproject/ray or ray-llm tag, so its versions cannot be checked")
            continue
        python = Version(f"{tag['py']}.{tag['minor']}")
        if python not in SpecifierSet(pins.requires_python):
            problems.append(f"image {image}: Python {python} does not satisfy requires-python {pins.requires_python}")
        if pins.ray and tag["ray"] != pins.ray:
            problems.append(f"image {image}: Ray {tag['ray']}, but the project pins ray=={pins.ray}")
        if pins.vllm:
            if tag["kind"] != "ray-llm":
                problems.append(f"image {image}: no vLLM in it (use rayproject/ray-llm)")
            elif pins.vllm_of_ray_llm is None or tag["ray"] != pins.ray:
                problems.append(f"image {image}: cannot tell its vLLM (ray[llm] {tag['ray']} is not installed here)")
            elif pins.vllm_of_ray_llm != pins.vllm:
                problems.append(
                    f"image {image}: vLLM {pins.vllm_of_ray_llm} (what ray[llm]=={tag['ray']} pins), but the "
                    f"project pins vllm=={pins.vllm}"
                )
    return problems


def nodes_of(cluster: dict, max_workers: int | None = None) -> list[Node]:
    """The largest cluster the file can scale to: every node type at its `max_workers` (the head once), with at
    most the file's (or the given) total of worker nodes, larger nodes first."""
    types = cluster["available_node_types"]
    head = cluster["head_node_type"]
    budget = cluster.get("max_workers", 0) if max_workers is None else max_workers
    nodes = [_node(f"{head} (head)", types[head]["resources"])]  # Ray's schema requires `resources`
    workers = sorted(
        ((name, t["resources"], t.get("max_workers", 0)) for name, t in types.items() if name != head),
        key=lambda item: (item[1].get("GPU", 0), item[1].get("CPU", 0)),
        reverse=True,
    )
    for name, resources, most in workers:
        count = min(most, budget)
        nodes += [_node(f"{name} #{i + 1}", resources) for i in range(count)]
        budget -= count
    return nodes


def _node(name: str, resources: dict) -> Node:
    accelerator = next((k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), None)
    return Node(name, float(resources.get("CPU", 0)), float(resources.get("GPU", 0)), accelerator)
