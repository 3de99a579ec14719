"""The sources package's public names load on first use and are the modules' own objects."""

from __future__ import annotations

import subprocess
import sys

import gpuaas.sources as sources


def test_every_public_name_resolves_to_its_home_modules_object() -> None:
    from gpuaas.sources import _kube_client, _prom_client

    assert sources.make_api_client is _kube_client.make_api_client
    assert sources.PromClient is _prom_client.PromClient
    assert sorted(sources.__all__) == sorted(sources._HOME)  # noqa: SLF001 - the table behind the lazy names
    for name in sources.__all__:
        assert getattr(sources, name) is not None, name


def test_importing_the_package_loads_no_client() -> None:
    code = "import sys, gpuaas.sources; print([m for m in ('kubernetes', 'requests') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
