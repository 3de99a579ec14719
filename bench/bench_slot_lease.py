"""How long the ``gpuaas-cluster-writes`` Prefect slot of a SIGKILLed holder stays taken.

A real ``prefect server start`` (its repossessor every ``--loop`` s), a holder process that takes the
slot the way ``tasks.writes.cluster_writes`` does and is killed with SIGKILL at once; then this process
tries every second to take the slot, with a bounded wait, and prints when it got it:

- ``other_host``: the holder named a host that is not this one (its pid cannot be checked): the slot
  frees when its lease (``GPUAAS_WRITES_SLOT_LEASE_SECONDS``, 60 s, Prefect's minimum) runs out and
  the repossessor revokes it: expect lease + up to one loop;
- ``this_host``: the holder ran here: the next writer finds its pid gone and gives the lease back: ~0 s.

    PYTHONPATH=. .venv/bin/python bench/bench_slot_lease.py [--loop 1]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOLDER = """
import os, signal, sys
from contextlib import ExitStack
from gpuaas.settings import load_settings
from tasks.writes import _enter_concurrency_slot, ensure_concurrency_limit
ensure_concurrency_limit()
_enter_concurrency_slot(ExitStack(), load_settings(), sys.argv[1].format(pid=os.getpid()), 0)
print("held", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seconds_until_free(env: dict[str, str], holder: str, limit_s: float) -> float:
    from prefect import flow

    from gpuaas.settings import load_settings
    from tasks.writes import WritesBusy, _enter_concurrency_slot

    killed = subprocess.run([sys.executable, "-c", HOLDER, holder], env=env, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -9 and "held" in killed.stdout, killed.stderr[-2000:]
    started = time.monotonic()

    @flow(name="bench-next-writer")
    def next_writer() -> float:
        while True:
            with ExitStack() as held:
                try:
                    _enter_concurrency_slot(held, load_settings(), f"bench-next@{socket.gethostname()}:{os.getpid()}",
                                            0)
                    return time.monotonic() - started
                except WritesBusy:
                    if time.monotonic() - started > limit_s:
                        raise
            time.sleep(1)

    return float(next_writer())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", type=float, default=1.0, help="repossessor loop of the server (s)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-slot-"))
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS": f"{args.loop:g}", "GPUAAS_DATA_DIR": str(tmp / "data"),
           "PYTHONPATH": str(ROOT)}
    os.environ.update({k: env[k] for k in ("PREFECT_API_URL", "PREFECT_HOME", "GPUAAS_DATA_DIR")})
    log = (tmp / "server.log").open("wb")
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("prefect server did not start: " + (tmp / "server.log").read_text()[-2000:])
            time.sleep(0.5)
        from gpuaas.settings import load_settings

        lease = load_settings().writes_slot_lease_seconds
        figures = {"slot_lease_s": lease, "repossessor_loop_s": args.loop,
                   "this_host_s": round(_seconds_until_free(env, f"bench-killed@{socket.gethostname()}:{{pid}}", 30), 1),
                   "other_host_s": round(_seconds_until_free(env, "bench-killed@another-host:{pid}", lease + 60), 1)}
        print(json.dumps(figures))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        log.close()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the flow run's Prefect client services keep non-daemon threads waiting on the stopped server
