"""``python -m tests.faults.flow_process reclaim|dry|collect|rebalance ISO | undo ID...``: one flow run in its own process.

The kill tests SIGKILL this process at a chosen step; it prints the flow's result as JSON when it
is allowed to finish.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime


def main(argv: list[str]) -> None:
    from flows.collect import collect
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    if argv[0] == "collect":
        result = collect(at=datetime.fromisoformat(argv[1]))
    elif argv[0] == "rebalance":  # an apply: the kill tests stop it mid-plan
        result = rebalance(apply=True, at=datetime.fromisoformat(argv[1]))
    elif argv[0] in ("reclaim", "dry"):
        result = reclaim(apply=argv[0] == "reclaim", at=datetime.fromisoformat(argv[1]))
    else:
        result = reclaim(undo=[int(a) for a in argv[1:]])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
