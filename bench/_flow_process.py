"""``python -m bench._flow_process reclaim|dry|collect|rebalance ISO | undo ID...``: one flow run in its own process.

The kill tests SIGKILL this process at a chosen step, and the overlap benchmark and test start many
at once (``bench._overlap``): it lives with the benchmarks, which must not import the test suite. It
prints the flow's result as JSON when it is allowed to finish. ``--warm``: import everything first, then read the environment and the
command line as one JSON line on stdin (``tests.faults.kill.flow_process`` starts the next one
while a test runs, so a kill test does not wait for the imports).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime


def main(argv: list[str]) -> None:
    if argv == ["--warm"]:
        import flows.collect
        import flows.rebalance
        import flows.reclaim  # noqa: F401 (the imports are what a warm process is for)

        line = sys.stdin.readline()
        if not line:  # never used: the test session ended
            return
        order = json.loads(line)
        os.environ.clear()
        os.environ.update(order["env"])
        argv = order["argv"]
    # Only the flow this run needs: each of the others costs a process a second or two of CPU to import.
    if argv[0] == "collect":
        from flows.collect import collect

        result = collect(at=datetime.fromisoformat(argv[1]))
    elif argv[0] == "rebalance":  # an apply: the kill tests stop it mid-plan
        from flows.rebalance import rebalance

        result = rebalance(apply=True, at=datetime.fromisoformat(argv[1]))
    else:
        from flows.reclaim import reclaim

        if argv[0] in ("reclaim", "dry"):
            result = reclaim(apply=argv[0] == "reclaim", at=datetime.fromisoformat(argv[1]))
        else:
            result = reclaim(undo=[int(a) for a in argv[1:]])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
