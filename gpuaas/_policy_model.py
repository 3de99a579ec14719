"""The base of every policy model, shared by the policy's modules (``gpuaas.policy`` re-exports what users need)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Fraction", "_Model"]

Fraction = Annotated[float, Field(ge=0, le=1)]


class _Model(BaseModel):
    # No inf/NaN anywhere: ``.inf`` minutes or a NaN threshold would pass every bound check.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
