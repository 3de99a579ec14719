"""The emulator's fidelity table, generated from the differential suite's case list.

``python -m tests.real.fidelity`` prints it; ``docs/real-cluster.md`` carries it and a test checks
that the two agree, so the document cannot drift from what the suite runs.
"""

from __future__ import annotations

from tests.real.differential_cases import CASES, KNOWN_DIFFERENCES

__all__ = ["table"]


def table() -> str:
    rows = ["| case | what it covers | steps | emulator vs Kueue v0.17 |", "|---|---|---|---|"]
    for case in CASES:
        verdict = f"differs: {KNOWN_DIFFERENCES[case.name]}" if case.name in KNOWN_DIFFERENCES else "same"
        rows.append(f"| `{case.name}` | {case.covers} | {len(case.steps)} | {verdict} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
