"""The manifest's hardware: the GPUs a run sees, asked without importing torch where no stage did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from t2rag.run_folder.manifest import gpu_names


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An `nvidia-smi` on PATH that prints two GPU names, or only the ones its `--id=` asks for."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'echo "$@" > "$(dirname "$0")/args"\n'
        'case "$*" in *--id=1*) echo "NVIDIA H100 80GB HBM3 (1)";; '
        '*) echo "NVIDIA H100 80GB HBM3 (0)"; echo "NVIDIA H100 80GB HBM3 (1)";; esac\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path


def test_gpus_come_from_nvidia_smi_when_no_stage_imported_torch(fake_smi, monkeypatch):
    assert gpu_names() == ["NVIDIA H100 80GB HBM3 (0)", "NVIDIA H100 80GB HBM3 (1)"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpu_names() == ["NVIDIA H100 80GB HBM3 (1)"]
    assert "--id=1" in (fake_smi / "args").read_text()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_names() == []


def test_no_nvidia_smi_is_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert gpu_names() == []


def test_a_manifest_leaves_torch_unimported():
    code = (
        "import sys; from t2rag.run_folder.manifest import hardware; info = hardware(); "
        "print(sorted(info), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         cwd=Path(__file__).parents[2])  # fmt: skip
    assert out.stdout.split("]")[-1].strip() == "False", out.stdout
    assert "'platform'" in out.stdout and "'cpus'" in out.stdout
