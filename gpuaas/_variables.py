"""The ``GPUAAS_*`` variables read or written outside ``GpuaasSettings``, named once.

Below the settings and the command line both: the settings refuse a variable one typo away from any
name gpuaas reads (these included), and the configuration reference documents them.
"""

from __future__ import annotations

__all__ = ["OTHER_VARIABLES"]

OTHER_VARIABLES: tuple[tuple[str, str, str, str], ...] = (
    ("GPUAAS_NOTIFY_WEBHOOK_URL", "str", "unset",
     "Where a flow run that failed, crashed or ended degraded is reported, as a JSON POST (`tasks/notify.py`); "
     "else the Prefect Secret block `gpuaas-notify-webhook-url`; neither: no notification. Never logged."),
    ("GPUAAS_PROJECT_DIR", "Path", "unset",
     "The directory the deployments' flow runs start in (the gpuaas checkout or the image's path), read by "
     "`prefect deploy` and the worker for `prefect.yaml`'s pull step; unset: where gpuaas is installed."),
    ("GPUAAS_CLUSTER_TOKEN", "str", "unset",
     "`gpuaas cluster up --token`: the bearer token the embedded API requires on every request (401 without "
     "it); the kubeconfig written carries it."),
    ("GPUAAS_K8S_CACHE", "Path", "`~/.cache/gpuaas/k8s`",
     "Root of the cache of the real backend's binaries (`gpuaas cluster up --backend real`), one directory "
     "per set of versions."),
    ("GPUAAS_ENDPOINT_<NAMESPACE>_<NAME>", "str", "(written)",
     "Written, not read: `gpuaas cluster up --env-file` gives each InferenceService's OpenAI-compatible "
     "endpoint URL (namespace and name in capitals, other characters `_`), for `gpuaas loadtest --url`."),
    ("GPUAAS_TEST_POSTGRES_URL", "str", "unset",
     "Tests and benchmarks only: a running PostgreSQL they use instead of starting their own."),
)
"""The ``GPUAAS_*`` variables read (or written) outside ``GpuaasSettings``: name, type, default, what for.
The configuration reference lists them after the settings; ``tests/test_docs.py`` fails when the code
names a ``GPUAAS_`` variable that the reference does not."""
