"""An answer nested too deeply to read fails its source in one line naming it, never with ``RecursionError``.

A fuzzing review served every request 100,000 ``[`` then 100,000 ``]``: the standard ``json`` decoder
(the library's under ``PromClient``, ``httpx``'s under OpenCost, the Kubernetes writer's) raised
``RecursionError``, which no source caught, so ``cost-report`` and ``replay`` ended with Python's words
instead of ``Prometheus at …``, and an OpenCost fault that should degrade the report ended it. Each source
here meets that server (a real one, on 127.0.0.1) and must fail as for any malformed answer:
``MalformedResponse``, and ``describe_failure`` saying ``answered JSON nested too deeply to read``.

An answer just under orjson's depth limit decodes, then recursed out when a reader quoted a value of it in
an error message; ``read_json`` refuses it too. Its fallback to the standard decoder keeps reading what the
sources read before (NaN, UTF-16), so no answer a server sends today is refused for the decoder's sake.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.errors import KubeAPIError, MalformedResponse
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._json_answer import MAX_DEPTH, NESTED_TOO_DEEPLY, UnreadableJSON, read_json
from gpuaas.sources.failures import describe_failure, in_words
from gpuaas.sources.history import pod_history
from gpuaas.sources.kube import kube_api_error, kube_request, read_kube
from gpuaas.sources.opencost import fetch_allocation, read_opencost
from gpuaas.sources.prometheus import read_prometheus
from tests.fixed_answer import fixed_answer_server, token_kubeconfig
from tests.sources.helpers import NOW

WORDS = "answered JSON nested too deeply to read"
FUZZED = b"[" * 100_000 + b"]" * 100_000
"""The fuzzer's answer: far past any decoder's depth."""


def _nested(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.fixture()
def serve() -> Iterator[Callable[..., str]]:
    """An HTTP endpoint on 127.0.0.1 that gives every request the same answer (the fuzzer's, unless told)."""
    with fixed_answer_server() as answer:
        def serve(body: bytes = FUZZED, status: int = 200) -> str:
            return answer(body, status)

        yield serve


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    return token_kubeconfig(tmp_path / "kubeconfig", server)


def _one_line(settings: GpuaasSettings, source: str, exc: BaseException, name: str, url: str) -> None:
    assert describe_failure(settings, source, exc) == f"{name} at {url}: {WORDS}"


def test_prometheus_names_itself(serve: Callable[..., str]) -> None:
    url = serve()
    settings = GpuaasSettings(prometheus_url=url, request_timeout_seconds=5)
    with pytest.raises(MalformedResponse, match=f"query answer is {NESTED_TOO_DEEPLY}") as info:
        read_prometheus(settings, NOW, [30])
    _one_line(settings, "prometheus", info.value, "Prometheus", url)


def test_prometheus_history_names_it_too(serve: Callable[..., str]) -> None:
    """``replay --from-prometheus`` reads range queries, in threads: the same error comes out of them."""
    settings = GpuaasSettings(prometheus_url=serve(), request_timeout_seconds=5)
    with pytest.raises(MalformedResponse, match=NESTED_TOO_DEEPLY):
        list(pod_history(settings, NOW - timedelta(hours=1), NOW))


def test_opencost_names_itself(serve: Callable[..., str]) -> None:
    """A ``MalformedResponse``, which the cost report catches (as ``GpuaasError``) to degrade, not end."""
    url = serve()
    settings = GpuaasSettings(opencost_url=url, request_timeout_seconds=5)
    with pytest.raises(MalformedResponse, match=f"answer is {NESTED_TOO_DEEPLY}") as info:
        fetch_allocation(settings, {"window": "1h"})
    _one_line(settings, "opencost", info.value, "OpenCost", url)


def test_the_kubernetes_reader_names_it(serve: Callable[..., str], tmp_path: Path) -> None:
    url = serve()
    settings = GpuaasSettings(kubeconfig=_kubeconfig(tmp_path, url), request_timeout_seconds=5)
    with pytest.raises(MalformedResponse, match=f"the answer is {NESTED_TOO_DEEPLY}") as info:
        read_kube(settings)
    _one_line(settings, "kube", info.value, "Kubernetes API", url)


def test_the_kubernetes_writer_names_it(serve: Callable[..., str], tmp_path: Path) -> None:
    """``undo`` reads the object back through the writer, which decodes with the sources' one reader inside
    ``kube_request``: a malformed answer naming the object, never a ``RecursionError``."""
    settings = GpuaasSettings(kubeconfig=_kubeconfig(tmp_path, serve()), request_timeout_seconds=5)
    with KubeWriter(settings) as writer, pytest.raises(MalformedResponse) as info:
        writer.get("RayCluster", "team-a", "train-7")
    assert info.value.detail == f"reading RayCluster team-a/train-7: the answer is {NESTED_TOO_DEEPLY}"


@pytest.mark.parametrize(("body", "words"), [
    (b"[" * 300 + b"]" * 300, NESTED_TOO_DEEPLY),  # decodes, and is still too deep to quote
    (b"[1, 2]", "not a JSON object (a list)"),
    (b'{"items": 3}', "not a list of objects (its items)"),
], ids=["deep", "a-list", "items-not-a-list"])
def test_the_kubernetes_writer_reads_only_an_object(serve: Callable[..., str], tmp_path: Path, body: bytes,
                                                    words: str) -> None:
    """The writer reads through the sources' one reader: an answer of the wrong shape is a malformed answer naming
    the object, not an ``AttributeError`` or a ``TypeError`` out of ``dict()``."""
    settings = GpuaasSettings(kubeconfig=_kubeconfig(tmp_path, serve(body)), request_timeout_seconds=5)
    with KubeWriter(settings) as writer, pytest.raises(MalformedResponse) as info:
        if words.startswith("not a list"):
            writer.list("RayCluster", "team-a", label_selector="app=x")
        else:
            writer.get("RayCluster", "team-a", "train-7")
    assert info.value.detail.endswith(f": the answer is {words}")


def test_kube_request_takes_the_standard_decoders_recursion_error() -> None:
    with pytest.raises(MalformedResponse, match=f"listing pods/v1: the answer is {NESTED_TOO_DEEPLY}"), \
            kube_request(verb="listing", kind="pods/v1", url="http://127.0.0.1:1"):
        json.loads(FUZZED)


def test_an_error_status_with_a_nested_body_keeps_its_status() -> None:
    """The body of an error status is read for a ``kind: Status``; one too deep to read is just not one."""
    from kubernetes.client.exceptions import ApiException

    exc = ApiException(status=500, reason="Internal Server Error")
    exc.body = FUZZED
    error = kube_api_error(exc, verb="listing", kind="pods/v1")
    assert isinstance(error, KubeAPIError) and str(error) == "listing pods/v1: 500 Internal Server Error"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000], ids=["just-past-the-bound", "just-under-orjsons-limit"])
def test_an_answer_that_decodes_but_is_too_deep_to_use(serve: Callable[..., str], depth: int) -> None:
    """Decoded, a value 1,000 deep recursed out of ``str()`` in the error message that quoted it."""
    answer = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": "@"}]}}
    url = serve(json.dumps(answer).replace('"@"', _nested(depth)).encode())
    with pytest.raises(MalformedResponse, match=NESTED_TOO_DEEPLY):
        read_prometheus(GpuaasSettings(prometheus_url=url, request_timeout_seconds=5), NOW, [30])
    labels = {"code": 200, "data": [{"a": {"properties": {"labels": {"x": "@"}}}}]}
    url = serve(json.dumps(labels).replace('"@"', _nested(depth)).encode())
    with pytest.raises(MalformedResponse, match=NESTED_TOO_DEEPLY):
        read_opencost(GpuaasSettings(opencost_url=url, request_timeout_seconds=5), NOW, 60)


@pytest.mark.parametrize("body", [FUZZED, b'{"a":' * 5000, _nested(MAX_DEPTH + 1).encode()],
                         ids=["arrays", "objects-unclosed", "past-the-bound"])
def test_read_json_refuses_nesting_in_its_words(body: bytes) -> None:
    with pytest.raises(UnreadableJSON, match=f"^{NESTED_TOO_DEEPLY}$"):
        read_json(body)


@pytest.mark.parametrize("body", [b"", b"<html>502 Bad Gateway</html>", b'{"a": 1', "\x00"])
def test_read_json_says_not_json(body: bytes | str) -> None:
    with pytest.raises(UnreadableJSON, match="^not JSON$"):
        read_json(body)


def test_read_json_reads_what_the_standard_decoder_read() -> None:
    """orjson refuses these; the sources' decoders before it read them, so ``read_json`` still does."""
    assert read_json(_nested(MAX_DEPTH)) is not None  # the bound itself is read
    assert str(read_json('{"v": NaN}')["v"]) == "nan"
    assert read_json('{"v": "x"}'.encode("utf-16")) == {"v": "x"}
    assert read_json(b'["\\ud800"]') == ["\ud800"]
    assert read_json(bytearray(b"[1]")) == [1] and read_json(memoryview(b'{"a": 2}')) == {"a": 2}


def test_in_words_names_a_recursion_error_that_escaped_a_decoder() -> None:
    """Where a caller outside the sources decodes with ``json`` and its ``RecursionError`` reaches a
    ``describe_failure`` (a snapshot's source status), it reads as the same phrase."""
    try:
        json.loads(FUZZED)
    except RecursionError as exc:
        assert in_words(exc) == WORDS
    else:
        pytest.fail("json decoded 100,000 levels")


def test_a_lone_surrogate_does_not_hide_the_depth() -> None:
    """orjson's encoder stops at the surrogate before it measures the depth; the bound holds all the same."""
    with pytest.raises(UnreadableJSON, match=NESTED_TOO_DEEPLY):
        read_json(b'["\\ud800",' + b"[" * 300 + b"]" * 300 + b"]")
    assert read_json(b'["\\ud800", [[1]]]') == ["\ud800", [[1]]]
