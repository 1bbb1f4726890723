"""KubeRay's v1 CRD schemas (RayCluster, RayJob, RayService), as vendored for the manifest tests.

Source: github.com/ray-project/kuberay at tag v1.7.0 (commit 9c13e713c17859f5c2d13bec324c9548b808c8f2),
`ray-operator/config/crd/bases/ray.io_{rayclusters,rayjobs,rayservices}.yaml`: the `openAPIV3Schema` of each
CRD's `v1` version, with the `description` fields dropped (they are most of the size), gzipped JSON keyed by kind.
Regenerate from a checkout of another release with:

    python -m tests.ray_jobs.kuberay_crds /path/to/kuberay > tests/ray_jobs/data/kuberay-v1-crds.json.gz

The API server prunes fields a CRD does not declare (or refuses them under strict field validation), so a
misspelt field in a manifest is silently lost on `kubectl apply`: `unknown_fields` finds those here.
"""

from __future__ import annotations

import gzip
import json
import sys
from functools import cache
from pathlib import Path

SCHEMAS = Path(__file__).parent / "data" / "kuberay-v1-crds.json.gz"
VERSION = "v1.7.0"
CRD_FILES = {"RayCluster": "rayclusters", "RayJob": "rayjobs", "RayService": "rayservices"}


@cache
def schema(kind: str) -> dict:
    """The v1 openAPIV3Schema of one KubeRay kind."""
    return json.loads(gzip.decompress(SCHEMAS.read_bytes()))[kind]


def unknown_fields(value: object, node: dict, path: str = "") -> list[str]:
    """Paths in `value` that the schema `node` does not declare (maps with free keys are left alone)."""
    if isinstance(value, dict):
        if node.get("x-kubernetes-preserve-unknown-fields") or "properties" not in node:
            return []
        out = []
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key not in node["properties"]:
                out.append(where)
            else:
                out += unknown_fields(item, node["properties"][key], where)
        return out
    if isinstance(value, list) and "items" in node:
        return [p for i, item in enumerate(value) for p in unknown_fields(item, node["items"], f"{path}[{i}]")]
    return []


def _strip(node: object) -> object:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def build(checkout: Path) -> bytes:
    import yaml

    out = {}
    for kind, name in CRD_FILES.items():
        crd = yaml.safe_load((checkout / f"ray-operator/config/crd/bases/ray.io_{name}.yaml").read_text())
        (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        out[kind] = _strip(v1["schema"]["openAPIV3Schema"])
    return gzip.compress(json.dumps(out, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


if __name__ == "__main__":
    sys.stdout.buffer.write(build(Path(sys.argv[1])))
