"""The layering of docs/architecture.md, checked on the source so that it cannot drift.

Read with ``ast`` (nothing is imported): each import of a gpuaas module, or of ``flows``, ``tasks`` and
``reports``, from the product and the benchmarks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("gpuaas", "flows", "tasks", "reports", "bench")
OURS = ("gpuaas", "flows", "tasks", "reports")


def _imports(directories: tuple[str, ...]) -> Iterator[tuple[str, str, list[str]]]:
    """(file relative to the root, module imported, names imported) for every import of our own modules."""
    for top in directories:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules = [(node.module, [a.name for a in node.names])]
                elif isinstance(node, ast.Import):
                    modules = [(a.name, []) for a in node.names]
                else:
                    continue
                for module, names in modules:
                    if module.split(".")[0] in OURS:
                        yield str(path.relative_to(ROOT)), module, names


def _package(file: str) -> str:
    return ".".join(Path(file).parent.parts)


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("gpuaas/policies", ("gpuaas.sources", "gpuaas.actions", "gpuaas.store", "gpuaas.cluster", "gpuaas.operations",
                         "gpuaas.snapshot", "flows", "tasks", "reports")),
    ("gpuaas/models", ("gpuaas.policies", "gpuaas.sources", "gpuaas.actions", "gpuaas.store", "gpuaas.operations",
                       "flows", "tasks", "reports")),
    ("gpuaas/sources", ("gpuaas.policies", "gpuaas.actions", "gpuaas.operations", "gpuaas.snapshot", "flows", "tasks")),
    ("gpuaas/operations", ("flows", "tasks", "prefect")),
])
def test_a_layer_imports_nothing_above_it(layer: str, forbidden: tuple[str, ...]) -> None:
    wrong = [f"{file}: {module}" for file, module, _ in _imports(("gpuaas",))
             if file.startswith(layer + "/") and module.startswith(forbidden)]
    assert wrong == []


def test_no_module_imports_another_packages_private_module_or_name() -> None:
    """``_x`` modules and names are their package's own: other packages use the names its ``__init__`` lists."""
    wrong = []
    for file, module, names in _imports(TOP):
        parts = module.split(".")
        private = next((i for i, part in enumerate(parts) if part.startswith("_")), None)
        if private is not None:
            owner: str | None = ".".join(parts[:private])
        elif any(n.startswith("_") and n != "__all__" for n in names):  # a private name: its module's package owns it
            owner = module if (ROOT / module.replace(".", "/")).is_dir() else ".".join(parts[:-1])
        else:
            owner = None
        here = _package(file)
        if owner is not None and here != owner and not here.startswith(owner + "."):
            wrong.append(f"{file}: {module} {names}")
    assert wrong == []


def test_the_policies_are_split_by_concept() -> None:
    flat = sorted(p.name for p in (ROOT / "gpuaas" / "policies").glob("*.py") if p.name != "__init__.py")
    assert flat == []
    packages = sorted(p.name for p in (ROOT / "gpuaas" / "policies").iterdir() if (p / "__init__.py").exists())
    assert packages == ["analysis", "cost", "deadlines", "incident", "quotas", "reclaim"]


USE_CASES = ("collect", "cost_report", "deadlines", "incident", "load_test", "preflight", "rebalance", "reclaim")


def test_every_use_case_has_an_operation_module_with_a_plan_called_by_its_tasks() -> None:
    """One module per use case in ``gpuaas/operations/``, each with a top-level ``plan``, and the use case's
    tasks module (``tasks/<use case>.py``, what its flow composes) imports it."""
    modules = sorted(p.stem for p in (ROOT / "gpuaas" / "operations").glob("*.py") if p.stem != "__init__")
    assert modules == list(USE_CASES)
    for name in modules:
        tree = ast.parse((ROOT / "gpuaas" / "operations" / f"{name}.py").read_text(encoding="utf-8"))
        assert "plan" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, name
    users = {file for file, module, _ in _imports(("tasks",)) if module.startswith("gpuaas.operations")}
    assert {f"tasks/{use_case}.py" for use_case in USE_CASES} <= users
