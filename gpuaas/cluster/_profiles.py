"""Utilisation and traffic profiles evaluated at an instant.

A profile is a pure function of the wall-clock instant and of how long the workload has been
running, so a sample can be regenerated for any time without replaying the past.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from datetime import datetime, timedelta

from gpuaas.cluster._scenario_models import (
    ConstantProfile,
    DiurnalProfile,
    IdleAfterProfile,
    Profile,
    TraceProfile,
)

__all__ = ["level", "mean_level"]


def level(profile: Profile, at: datetime, running_for: timedelta) -> float:
    """The profile's level at ``at``, for a workload that started ``running_for`` ago."""
    if isinstance(profile, ConstantProfile):
        return profile.value
    if isinstance(profile, IdleAfterProfile):
        return profile.busy if running_for < profile.after else profile.idle
    if isinstance(profile, DiurnalProfile):
        hours = at.hour + at.minute / 60 + at.second / 3600
        return max(0.0, profile.mean + profile.amplitude * math.cos(2 * math.pi * (hours - profile.peak_hour) / 24))
    if isinstance(profile, TraceProfile):
        offset = running_for
        if profile.period is not None and profile.period > timedelta(0):
            offset = timedelta(seconds=offset.total_seconds() % profile.period.total_seconds())
        starts = [p[0] for p in profile.points]
        idx = bisect_right(starts, offset) - 1
        return profile.points[max(idx, 0)][1]
    raise TypeError(f"unknown profile {profile!r}")


def mean_level(profile: Profile, start: datetime, end: datetime, running_at_start: timedelta,
               step: timedelta = timedelta(seconds=60)) -> float:
    """Average level over ``[start, end]`` sampled every ``step`` (what a test expects)."""
    values = []
    t = start
    while t <= end:
        values.append(level(profile, t, running_at_start + (t - start)))
        t += step
    return sum(values) / len(values) if values else 0.0
