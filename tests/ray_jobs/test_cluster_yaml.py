"""cluster.yaml is a valid launcher config with a CPU head and H100 GPU workers."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_yaml_node_types_and_resources():
    cfg = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert cfg["provider"]["type"] == "aws"
    nodes = cfg["available_node_types"]
    head = nodes[cfg["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0 and head["max_workers"] == 0
    gpu = nodes["gpu_h100"]
    assert gpu["node_config"]["InstanceType"] == "p5.48xlarge"
    assert gpu["resources"]["GPU"] == 8 and gpu["resources"]["accelerator_type:H100"] == 8
    assert 0 <= gpu["min_workers"] <= gpu["max_workers"] <= cfg["max_workers"]
    setup = " ".join(cfg["setup_commands"])
    assert "t2rag[gpu]" in setup
    assert "IamInstanceProfile" in gpu["node_config"]  # S3 access without credentials in the file
