"""The documentation: short README, references generated from the code, links that resolve, no issue numbers.

The reference pages (``docs/reference/``) are written by ``python -m gpuaas.cli._reference``; when a setting
or an option changes without them, ``test_references_match_the_code`` fails and says how to regenerate.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuaas.cli._reference import OTHER_VARIABLES, REFERENCE_DIR, cli_reference, configuration_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize(("page", "render"), [("configuration.md", configuration_reference), ("cli.md", cli_reference)])
def test_references_match_the_code(page: str, render: object) -> None:
    assert callable(render)
    committed = (REFERENCE_DIR / page).read_text(encoding="utf-8")
    assert committed == render(), f"docs/reference/{page} drifted: run .venv/bin/python -m gpuaas.cli._reference"


def _variables_named(paths: list[Path]) -> dict[str, Path]:
    """Every ``GPUAAS_*`` name written in these files (a name ending in ``_`` is a prefix), with one file naming it."""
    found: dict[str, Path] = {}
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            for name in re.findall(r"GPUAAS_[A-Z0-9_]+", path.read_text(encoding="utf-8", errors="replace")):
                found.setdefault(name, path)
    return found


def test_every_environment_variable_is_in_the_configuration_reference() -> None:
    """A ``GPUAAS_*`` variable named anywhere in the shipped code, deployments or docs is in the generated
    reference: a setting through ``GpuaasSettings``, any other through ``OTHER_VARIABLES``. The tests' own
    knobs (``tests/``) are not a user's configuration and are not searched."""
    page = (REFERENCE_DIR / "configuration.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(GPUAAS_[^`]+)`", page, re.MULTILINE))
    assert {name for name, *_ in OTHER_VARIABLES} <= documented
    families = [name.split("<")[0] for name in documented if "<" in name]  # GPUAAS_ENDPOINT_<NAMESPACE>_<NAME>
    paths = [p for d in ("gpuaas", "flows", "tasks", "reports", "bench", "deployments", "examples", "tools", "docs")
             for p in (ROOT / d).rglob("*") if REFERENCE_DIR not in p.parents]
    paths += [ROOT / "README.md", ROOT / "prefect.yaml", ROOT / "Makefile", ROOT / "pyproject.toml"]
    missing = [f"{name} ({path.relative_to(ROOT)})" for name, path in sorted(_variables_named(paths).items())
               if name not in documented and not name.startswith(tuple(families))
               and not (name.endswith("_") and any(d.startswith(name) for d in documented))]
    assert not missing, (f"not in docs/reference/configuration.md: {missing}; a variable read outside the settings "
                         "goes into gpuaas._variables.OTHER_VARIABLES, then run .venv/bin/python -m "
                         "gpuaas.cli._reference")


def test_the_readme_is_short_and_starts_with_what_and_for_whom() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) < 12 * 1024
    for heading in ("## The safety contract", "## The two commands", "## Start on your cluster in five steps",
                    "## The flows"):
        assert heading in text
    assert "platform ops teams" in text.split("##")[0]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_no_issue_numbers_or_development_history() -> None:
    pattern = re.compile(r"\(issue \d|\bissue \d+|Found and fixed", re.IGNORECASE)
    sources = [*DOCS, *ROOT.glob("examples/*"), *(p for d in ("gpuaas", "flows", "tasks", "reports", "bench", "tests")
                                                   for p in (ROOT / d).rglob("*.py"))]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources if p.is_file() and p != Path(__file__)
             for m in pattern.finditer(p.read_text(encoding="utf-8", errors="replace"))]
    assert not found, found
