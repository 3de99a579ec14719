"""The reclaim opt-out, ``gpuaas.io/reclaim: "never"``, as people actually write it.

Annotations are free text typed by people: a YAML block scalar (``reclaim: |``) leaves
``"never\\n"``, others type ``Never``. An opt-out that silently fails to match is the worst
outcome a reclaim can have (a team's protected workload stopped), so the value is compared
stripped and case-folded wherever it is read: on the Workload, on its owner and the owner's
controllers (the snapshot), and on the batch job that owns it (the Kubernetes source, which
lists the jobs for their annotations alone). One definition here, below both.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["OPT_OUT_ANNOTATION", "OPT_OUT_VALUE", "is_opted_out"]

OPT_OUT_ANNOTATION = "gpuaas.io/reclaim"
OPT_OUT_VALUE = "never"


def is_opted_out(value: Any) -> bool:
    """True for ``never`` in any case, with any surrounding whitespace; False for None/NaN/anything else."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return str(value).strip().casefold() == OPT_OUT_VALUE
