"""The deployments' pull step on a fresh checkout: no path to edit, and a wrong one named in the run's log.

The deployed version, run by a real process worker, is in ``tests/test_prefect_yaml.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.pull import ProjectDirectoryMissing, set_project_directory

ROOT = Path(__file__).resolve().parents[2]


def test_unset_directory_means_the_installed_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert set_project_directory("") == {"directory": str(ROOT)}
    assert Path.cwd() == ROOT


def test_a_directory_without_the_project_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProjectDirectoryMissing, match=r"'/opt/nowhere' \(from GPUAAS_PROJECT_DIR\) does not exist"):
        set_project_directory("/opt/nowhere")
    with pytest.raises(ProjectDirectoryMissing, match="has no flows/ package"):
        set_project_directory(str(tmp_path))
    assert Path.cwd() == tmp_path  # nothing changed
