"""One full gpuaas cycle on embedded fleets of 1/10 of and the full 2,000 nodes / 16,000 GPUs /
50,000 workloads / 200 ClusterQueues in one cohort / 24 h of telemetry.

Each stage is the real Prefect flow (Prefect's test harness), in this process, in order: collect,
then on its snapshot (``snapshot_id``: the fleet is read once a cycle) reclaim (dry-run), deadline
plan (dry-run, no nudges) and rebalance plan (dry-run), and the cost report (one day, no HTML). The API
and Prometheus are reached through the fault proxy (``gpuaas.cluster.fault_proxy``, no faults armed) so
that every request and every byte is counted; the bare transfer replays the very same requests through the same relay with no processing, stage by stage, the API's and
Prometheus' at the same time (a collect reads them at once) and as many at a time as the readers send
them (PromQL two at a time, the collect's lists three), so that ``overhead_ratio`` =
``cycle_s / transfer_s`` compares like with like. The totals are counted before the replay. The fleet is RayClusters (their pods hold GPUs, so
dcgm series carry pod labels) and every 4th tenant's jobs go idle 2 h after they start, so reclaim has
idle workloads to judge. Telemetry is backfilled at the 60 s sample interval for the last hour (the
30-minute idle window and its coverage rule see every sample) and at 5 minutes before it
(``gpuaas.cluster._history``; 24 h at 60 s for 16,000 GPUs would be ~10^8 samples).

    python -m bench.bench_cycle [--sizes tenth,full] [--profile DIR] [--smoke]

``--smoke`` is ``--sizes smoke`` (32 GPUs, 20 workloads, 2 h of history) without waiting for Prometheus'
compaction, on the Prefect API of ``PREFECT_API_URL`` when it is set.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import httpx

import gpuaas.cluster.fault_proxy as relay
from bench._run import headline, parser, run, scratch
from bench._servers import smoke_prefect_api
from bench.bench_cluster import fleet
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.fault_proxy import FaultProxy, Hit, fault_proxy
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.sources import PROMQL_AT_ONCE
from gpuaas.sources.kube import LISTS_AT_ONCE

SIZES = {"smoke": (4, 2, 20), "tenth": (200, 20, 5000), "full": (2000, 200, 50000)}  # nodes (8 GPUs), CQs, workloads
HISTORY = {"smoke": timedelta(hours=2)}  # the smoke check's fleet: enough for the 30-minute idle window
FULL_DAY = timedelta(hours=24)
KIND = "RayCluster"  # a job kind: its pods hold GPUs, so the dcgm series carry pod labels
SAMPLE_S = 60  # the policy's sample interval: the last FINE of history is stepped at it
FINE, COARSE = timedelta(hours=1), timedelta(minutes=5)  # gpuaas.cluster._history
MISSING: list[str] = []  # stages of the cycle this bench cannot run yet


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (promtool): wall time on a shared host is noise."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stages(at: datetime) -> list[tuple[str, Callable[[], object]]]:
    """The cycle: one collect, then every deciding stage on that snapshot (``snapshot_id``), as an
    operator's by-hand cycle runs them; scheduled runs each collect for themselves."""
    from flows.collect import collect
    from flows.cost_report import cost_report
    from flows.deadlines import deadlines
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    taken: dict[str, int] = {}

    def collected() -> object:
        summary = collect(at=at)
        taken["id"] = int(summary["snapshot_id"])
        return summary

    return [("collect", collected),
            ("reclaim dry-run", lambda: reclaim(apply=False, at=at, snapshot_id=taken["id"])),
            ("deadline plan", lambda: deadlines(apply=False, at=at, nudge=False, snapshot_id=taken["id"])),
            ("rebalance plan", lambda: rebalance(apply=False, at=at, snapshot_id=taken["id"])),
            ("cost report", lambda: cost_report(window="1d", at=at, compare=False, html=False))]


def _replay(proxy: FaultProxy, hits: list[Hit], headers: dict[str, str], at_once: int = 1) -> float:
    """The same requests, answers read and dropped, ``at_once`` at a time as the readers send them
    (``gpuaas.sources._concurrent``): the unavoidable transfer."""
    started = time.perf_counter()
    with httpx.Client(base_url=proxy.url, timeout=600, headers=headers) as http:
        def send(hit: Hit) -> None:
            if hit.method == "GET":
                http.get(hit.path).read()
            else:
                http.request(hit.method, hit.path, content=hit.body,
                             headers={"Content-Type": "application/x-www-form-urlencoded"}).read()

        with ThreadPoolExecutor(max_workers=at_once) as pool:
            list(pool.map(send, hits))
    return time.perf_counter() - started


def _profiled(run: Callable[[], object], out: Path) -> object:
    """Run one stage under cProfile; the stats go to ``out`` and the top of our own code to stdout."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    result: object = prof.runcall(run)
    prof.dump_stats(out)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(r"gpuaas|flows/|tasks/|reports/", 25)
    return result


def _compacted(prometheus_url: str, quiet_s: float = 90.0, limit_s: float = 600.0) -> float:
    """Wait until Prometheus has compacted the backfilled history (at least one compaction when it has
    blocks to merge, then its block count and compaction count unchanged for ``quiet_s``, longer than
    its one-minute compaction tick), as a long-running Prometheus has: right after the backfill a
    cycle's queries share the two cores with that compaction and search a dozen 2-hour blocks. The
    first compaction can come two minutes after the start: quiet before it is not settled."""
    started = time.perf_counter()
    last: dict[str, float] = {}
    quiet_since = started
    while time.perf_counter() - started < limit_s:
        text = httpx.get(f"{prometheus_url}/metrics", timeout=30).text
        now = {name: float(value) for name, _, value in (line.partition(" ") for line in text.splitlines())
               if name in ("prometheus_tsdb_blocks_loaded", "prometheus_tsdb_compactions_total")}
        waiting = now.get("prometheus_tsdb_blocks_loaded", 0) >= 3 and not now.get("prometheus_tsdb_compactions_total")
        if now != last or waiting:
            last, quiet_since = now, time.perf_counter()
        elif time.perf_counter() - quiet_since >= quiet_s:
            break
        time.sleep(5)
    return time.perf_counter() - started


def _serve_cluster(name: str, base: Path, conn: Connection, settle: bool = True) -> None:
    """The embedded cluster in a process of its own, so that the peak RSS measured is the flows' alone
    (in production the API server, Kueue and Prometheus do not live in the flow process)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unwind: Prometheus runs in a session of its own
    nodes, queues, workloads = SIZES[name]
    history = HISTORY.get(name, FULL_DAY)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - history
    built, built_cpu = time.perf_counter(), _cpu_s()
    scenario = fleet(nodes, queues, workloads, kind=KIND, cohorts=1, step=f"{SAMPLE_S}s", idle_every=4)
    # Prometheus scrapes the embedded exporter at the sample interval, not the tests' 5 s, and the clock
    # never moves: at 16,000 GPUs each scrape was 0.4 of a core (rendering and parsing ~10^5 samples) on the
    # cycle's two cores, a load a real fleet puts on its exporters and Prometheus, not on gpuaas.
    with EmbeddedCluster(scenario, base / name, history=history, clock=ManualClock(start), coarse_step=COARSE,
                         fine_history=FINE, scrape_interval=timedelta(seconds=SAMPLE_S),
                         live_interval=float(SAMPLE_S)) as cluster:
        gc.freeze()  # the store's 100,000+ objects are long-lived: no collector pass over them while serving
        built_s, cpu_s = time.perf_counter() - built, _cpu_s() - built_cpu
        settled_s = _compacted(cluster.prometheus_url) if settle else 0.0
        conn.send({"settled_s": settled_s, "api_url": cluster.api_url, "prometheus_url": cluster.prometheus_url,
                   "env": cluster.settings_env(), "kubeconfig": str(cluster.kubeconfig), "at": cluster.clock.now(),
                   "built_s": built_s, "cpu_s": cpu_s, "rss_mb": rss_mb()})
        conn.recv()  # until the parent is done


def start_cluster(name: str, base: Path, settle: bool = True) -> tuple[BaseProcess, Connection]:
    """The embedded cluster of size ``name`` building in its own process; ``one_size`` waits for it."""
    parent, child = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(target=_serve_cluster, args=(name, base, child, settle),
                                                           daemon=True)
    server.start()
    return server, parent


def one_size(name: str, base: Path, started: tuple[BaseProcess, Connection],
             profile: Path | None = None) -> dict[str, object]:
    relay.UPSTREAM_TIMEOUT_S = 600.0  # the 16,000-GPU activity query alone took 105 s in Prometheus here
    server, parent = started
    try:
        if not parent.poll(3600):
            raise RuntimeError(f"{name}: the embedded cluster did not start within an hour")
        ready = parent.recv()
        with fault_proxy(ready["api_url"]) as kube, fault_proxy(ready["prometheus_url"]) as prom:
            return _cycle(name, base, ready, kube, prom, profile)
    finally:
        if server.is_alive():
            parent.send("stop")
        server.join(timeout=60)


def _cycle(name: str, base: Path, cluster: dict[str, Any], kube: FaultProxy, prom: FaultProxy,
           profile: Path | None) -> dict[str, object]:
    nodes, queues, workloads = SIZES[name]
    print(f"== {name}: {nodes} nodes, {nodes * 8} GPUs, {queues} ClusterQueues in 1 cohort, "
          f"{workloads} workloads, {HISTORY.get(name, FULL_DAY) / timedelta(hours=1):g} h history; built in {cluster['built_s']:.0f}s ({cluster['cpu_s']:.0f} CPU s "
          f"with promtool, cluster process {cluster['rss_mb']:.0f} MiB; Prometheus compacted the history in "
          f"{cluster['settled_s']:.0f}s more; load average {os.getloadavg()[0]:.1f})",
          flush=True)
    kubeconfig = Path(cluster["kubeconfig"])
    os.environ.update(cluster["env"])
    os.environ.update({"GPUAAS_NVML": "off", "GPUAAS_DATA_DIR": str(base / name / "gpuaas"),
                       "GPUAAS_PROMETHEUS_URL": prom.url, "GPUAAS_REQUEST_TIMEOUT_SECONDS": "300",
                       "GPUAAS_KUBECONFIG": str(kube.kubeconfig(kubeconfig, base / name / "kc"))})
    at = cluster["at"]
    print(f"{'stage':<16} {'wall s':>7} {'CPU s':>6} {'peak RSS MiB':>12} {'k8s req':>8} {'PromQL':>7} {'Prom MB':>8}")
    cycle = 0.0
    slices: list[tuple[str, list[Hit], list[Hit]]] = []
    for stage, step in _stages(at):
        k0, p0 = len(kube.relayed), len(prom.relayed)
        began, began_cpu = time.perf_counter(), time.process_time()
        if profile is None:
            out = step()
        else:
            out = _profiled(step, profile / f"{name}-{stage.replace(' ', '_')}.prof")
        wall = time.perf_counter() - began
        cycle += wall
        slices.append((stage, kube.relayed[k0:], prom.relayed[p0:]))
        queries = _queries(slices[-1][2])
        print(f"{stage:<16} {wall:>7.2f} {time.process_time() - began_cpu:>6.1f} {rss_mb():>12.0f} "
              f"{len(slices[-1][1]):>8} {len(queries):>7} {sum(h.size for h in queries) / 1e6:>8.2f}", flush=True)
        if isinstance(out, dict) and out.get("summary"):
            verdicts = f"{out['summary']}{' (degraded)' if out.get('degraded') else ''}"
            print(f"{'':<16} {verdicts}")
    for missing in MISSING:
        print(f"{'(missing)':<16} {missing}")
    print(f"{'(store)':<16} this collect's full snapshot document: {_stored_document_mb():.2f} MB compressed "
          "(a real collect's, stored one cycle in store.full_snapshot_every_minutes; bench_store.py: the rest)")
    peak = rss_mb()
    kube_hits = [h for _, hits, _ in slices for h in hits]
    queries = _queries([h for _, _, hits in slices for h in hits])
    token = _token(kubeconfig)
    print(f"{'bare transfer':<16} {'kube s':>7} {'Prom s':>6}  (each stage's requests replayed: the API's and Prometheus' at once, PromQL 2 at a time, the collect's lists 3 at a time)")
    transfer = 0.0
    for stage, kube_part, prom_part in slices:
        with ThreadPoolExecutor(max_workers=2) as pool:
            lists = LISTS_AT_ONCE if stage == "collect" else 1  # the cost report reads its lists one by one
            k, p = (pool.submit(_replay, kube, kube_part, token, lists),
                    pool.submit(_replay, prom, prom_part, {}, PROMQL_AT_ONCE))
            took = (k.result(), p.result())
        transfer += max(took)
        print(f"{stage:<16} {took[0]:>7.2f} {took[1]:>6.2f}", flush=True)
    return {"gpus": nodes * 8, "workloads": workloads, "queues": queues, "cycle_s": round(cycle, 2),
            "peak_rss_mb": round(peak), "k8s_requests": len(kube_hits), "prom_queries": len(queries),
            "prom_bytes": sum(h.size for h in queries), "transfer_s": round(transfer, 2),
            "overhead_ratio": round(cycle / transfer, 2) if transfer else None}


def _stored_document_mb() -> float:
    """Bytes of the newest snapshot row's compressed document in the cycle's store (the collect's)."""
    from sqlalchemy import text

    from gpuaas.settings import load_settings
    from gpuaas.store import open_store

    store = open_store(load_settings())
    with store.engine.connect() as conn:
        size = conn.execute(text("SELECT length(compressed) FROM snapshots ORDER BY id DESC LIMIT 1")).scalar()
    store.engine.dispose()
    return float(size or 0) / 1e6


def _queries(hits: list[Hit]) -> list[Hit]:
    return [h for h in hits if "/api/v1/query" in h.path]


def _token(kubeconfig: Path) -> dict[str, str]:
    import yaml

    users = yaml.safe_load(kubeconfig.read_text()).get("users") or []
    token = (users[0].get("user") or {}).get("token") if users else None
    return {"Authorization": f"Bearer {token}"} if token else {}


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("--sizes", default="tenth,full")
    cli.add_argument("--profile", type=Path, help="write a cProfile per stage into this folder")
    args = cli.parse_args(argv)
    sizes = ["smoke"] if args.smoke else args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        cli.error(f"--sizes: unknown size {', '.join(unknown)}; expected some of {', '.join(SIZES)}")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_HOME", str(scratch("bench-prefect-")))
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.testing.utilities import prefect_test_harness

    base = scratch("bench-cycle-")
    lines = []
    first = start_cluster(sizes[0], base, settle=not args.smoke)  # it builds while Prefect's test server starts
    given = smoke_prefect_api(args.smoke)
    with nullcontext() if given else prefect_test_harness(server_startup_timeout=180):
        for i, name in enumerate(sizes):
            started = first if i == 0 else start_cluster(name, base, settle=not args.smoke)
            lines.append(one_size(name, base, started, args.profile))
    for line in lines:
        print(json.dumps(line))
    headline("; ".join(f"{line['gpus']:,} GPUs: cycle {line['cycle_s']} s, {line['overhead_ratio']}x the bare "
                       f"transfer, peak RSS {line['peak_rss_mb']} MiB" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_cycle"))
