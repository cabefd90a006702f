"""The cost of supervision on the hot path: calls a second of the golden trace beside the spec, in-process and supervised.

    .venv/bin/python -m bench.supervision [ROUNDS]

Both sides run the same work in one run: ``first_disagreement`` of the
golden trace on ``impl:RadixCache`` loaded as the command line loads it
(guarded), ROUNDS times; the supervised side in a child of ``supervise``,
where every call also writes the beacon.  Prints calls/s of each and the ratio.
"""

from __future__ import annotations

import sys
import time

from prefixspec.drive.golden import golden_trace
from prefixspec.compare.shrink import first_disagreement
from prefixspec.targets.named import load_target
from prefixspec.targets.supervised import send, supervise
from spec.api import Rules


def calls_per_second(rounds: int) -> float:
    trace = golden_trace()
    factory = load_target("impl:RadixCache", 5.0)
    started = time.perf_counter()
    for _ in range(rounds):
        assert first_disagreement(trace.block_size, trace.calls(), factory, Rules()) is None
    return rounds * len(trace.steps) / (time.perf_counter() - started)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20

    def work() -> int:
        send("rate", calls_per_second(rounds))
        return 0

    for attempt in range(3):  # alternate, so that a load that comes and goes falls on both
        inside = calls_per_second(rounds)
        ended = supervise(work, 5.0)
        supervised = next(value for kind, value in ended.messages if kind == "rate")
        assert isinstance(supervised, float)
        print(f"round {attempt + 1}: in-process {inside:,.0f} calls/s, supervised {supervised:,.0f} calls/s, ratio {supervised / inside:.3f}")


if __name__ == "__main__":
    main()
