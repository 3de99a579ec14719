"""A pod OpenCost lists with 0 GPUs while the GPU telemetry saw its GPUs keeps the hours the telemetry saw.

Why: OpenCost counts ``nvidia.com/gpu`` (and ``k8s.amazonaws.com/vgpu``) only, so a notebook on a MIG slice
(``nvidia.com/mig-3g.40gb``) or a time-sliced ``nvidia.com/gpu.shared`` is listed with gpuHours 0 and gpuCost $0.
Clamping the telemetry's hours to that 0 dropped them from every stage of the funnel: 5 GPU-hours seen idle were in
no figure, and the idle hours, the allocated hours and the waste's hours all read too low. The inputs are the cost
report's hand-checked ones (``tests/policies/test_cost_report``), with nb-0 listed as OpenCost lists such a pod.
"""

from __future__ import annotations

from dataclasses import replace

from gpuaas.models import CostInputs
from gpuaas.policies.cost import build_cost_report
from tests.policies.test_cost_report import POLICY, _inputs


def _nb_on_a_mig_slice() -> CostInputs:
    """nb-0 (5 GPU-hours seen, all idle) listed with 0 GPU-hours and $0 GPU cost; its CPU and RAM stay ($2.50)."""
    base = _inputs()
    assert base.costs is not None
    costs = base.costs.copy()
    nb = costs["pod"] == "nb-0"
    costs.loc[nb, ["gpu_hours", "gpu_cost", "total_cost"]] = [0.0, 0.0, 2.5]
    return replace(base, costs=costs)


def test_the_hours_the_telemetry_saw_stay_in_the_funnel() -> None:
    report = build_cost_report(_nb_on_a_mig_slice(), POLICY)
    a = report.tenants[0]
    # as with OpenCost counting nb-0's GPU: 19 allocated, 7 idle (2 of chat's, 5 of nb-0's), 4 unknown (dark-0)
    assert (a["allocated_gpu_hours"], a["idle_gpu_hours"], a["unknown_gpu_hours"], a["busy_gpu_hours"]) == (
        19.0, 7.0, 4.0, 8.0)
    # the money is OpenCost's: nb-0's GPUs are in no workload's cost, and its idle hours in no waste
    assert (a["gpu_cost"], a["total_cost"], a["waste_cost"]) == (56.0, 68.5, 8.0)
    assert report.cluster["allocated_gpu_hours"] == 24.0 and report.cluster["idle_gpu_hours"] == 7.0


def test_a_note_says_opencost_priced_none_of_its_gpus() -> None:
    report = build_cost_report(_nb_on_a_mig_slice(), POLICY)
    [said] = [n for n in report.notes if "with 0 GPUs" in n]
    assert said.startswith("1 pod with 5.00 GPU-hours of telemetry is in OpenCost's allocation with 0 GPUs "
                           "(the most: a/nb-0, 5.00 GPU-hours)"), said
    assert "priced none of its GPUs" in said and "nvidia.com/mig-" in said
    assert "OpenCost's idle for the nodes" in said and "5.00 idle GPU-hours are in no waste figure" in said


def test_a_pod_listed_with_gpus_is_still_clamped_to_opencosts_hours() -> None:
    """A finished pod's last sample step can fall after OpenCost's end of it: OpenCost's hours stand, no note."""
    base = _inputs()
    gpu = base.gpu.copy()
    gpu.loc[gpu["pod"] == "chat-predictor-0", "observed_h"] = 10.5
    report = build_cost_report(replace(base, gpu=gpu), POLICY)
    assert report.tenants[0]["allocated_gpu_hours"] == 19.0
    assert not any("with 0 GPUs" in n for n in report.notes)
