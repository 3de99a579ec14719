"""How long the ``gpuaas-cluster-writes`` Prefect slot of a SIGKILLed holder stays taken.

A real ``prefect server start`` (its repossessor every ``--loop`` s), a holder process that takes the
slot the way ``tasks.writes.cluster_writes`` does and is killed with SIGKILL at once; then this process
tries every second to take the slot, with a bounded wait, and prints when it got it:

- ``other_host``: the holder named a host that is not this one (its pid cannot be checked): the slot
  frees when its lease (``GPUAAS_WRITES_SLOT_LEASE_SECONDS``, 60 s, Prefect's minimum) runs out and
  the repossessor revokes it: expect lease + up to one loop;
- ``this_host``: the holder ran here: the next writer finds its pid gone and gives the lease back: ~0 s.

    python -m bench.bench_slot_lease [--loop 1] [--smoke]

``--smoke``: ``this_host`` alone (``other_host`` waits out the 60 s lease), on the Prefect API of
``PREFECT_API_URL`` when it is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack, nullcontext

from bench._run import ROOT, BenchFailed, headline, parser, run, scratch
from bench._servers import smoke_prefect_api
from gpuaas.cluster.services import prefect_server

HOLDER = """
import os, signal, sys
from contextlib import ExitStack
from gpuaas.actions import new_holder
from gpuaas.settings import load_settings
from tasks.writes import enter_concurrency_slot, ensure_concurrency_limit
ensure_concurrency_limit()
holder = new_holder("bench-killed") if sys.argv[1] == "here" else sys.argv[1].format(pid=os.getpid())
enter_concurrency_slot(ExitStack(), load_settings(), holder, 0)
print("held", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _seconds_until_free(env: dict[str, str], holder: str, limit_s: float) -> float:
    """Seconds until the next writer gets the slot a SIGKILLed ``holder`` took (``here``: a holder of this host
    and PID namespace, as a flow run names itself; else the name, ``{pid}`` filled in by the holder)."""
    from prefect import flow

    from gpuaas.actions import new_holder
    from gpuaas.settings import load_settings
    from tasks.writes import WritesBusy, enter_concurrency_slot

    killed = subprocess.run([sys.executable, "-c", HOLDER, holder], env=env, capture_output=True, text=True,
                            timeout=120)
    if killed.returncode != -9 or "held" not in killed.stdout:
        last = killed.stderr.strip().splitlines()[-1:] or ["no output"]
        raise BenchFailed(f"the holder did not take the slot and die (exit {killed.returncode}): {last[0]}")
    started = time.monotonic()

    @flow(name="bench-next-writer")
    def next_writer() -> float:
        while True:
            with ExitStack() as held:
                try:
                    enter_concurrency_slot(held, load_settings(), new_holder("bench-next"), 0)
                    return time.monotonic() - started
                except WritesBusy:
                    if time.monotonic() - started > limit_s:
                        raise
            time.sleep(1)

    return float(next_writer())


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("--loop", type=float, default=1.0, help="repossessor loop of the server (s)")
    args = cli.parse_args(argv)
    tmp = scratch("bench-slot-")
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS": f"{args.loop:g}", "GPUAAS_DATA_DIR": str(tmp / "data"),
           "PYTHONPATH": str(ROOT)}
    given = smoke_prefect_api(args.smoke)
    with nullcontext(given) if given else prefect_server(env, tmp / "server.log") as api:
        env["PREFECT_API_URL"] = api
        os.environ.update({k: env[k] for k in ("PREFECT_API_URL", "PREFECT_HOME", "GPUAAS_DATA_DIR")})
        from gpuaas.settings import load_settings

        lease = load_settings().writes_slot_lease_seconds
        figures: dict[str, float] = {
            "slot_lease_s": lease, "repossessor_loop_s": args.loop,
            "this_host_s": round(_seconds_until_free(env, "here", 30), 1)}
        if not args.smoke:
            figures["other_host_s"] = round(_seconds_until_free(env, "bench-killed@another-host:{pid}", lease + 60), 1)
        print(json.dumps(figures))
    headline(f"slot free after {figures['this_host_s']} s (holder on this host)"
             + (f", {figures['other_host_s']} s (another host; lease {lease:g} s)" if "other_host_s" in figures else ""))
    return 0


if __name__ == "__main__":
    code = run(main, "bench_slot_lease")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the flow run's Prefect client services keep non-daemon threads waiting on the stopped server
