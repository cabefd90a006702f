"""``prefixspec bench``: the benchmarks of issue 7 (``bench/``), from the command line.

The benchmarks live outside the package (``bench/``, next to ``spec/`` and
``impl/``) and need SGLang, torch and matplotlib, which ``make bench`` installs
into ``.venv-bench``.  When this interpreter cannot import SGLang but that venv
exists, the command runs ``python -m bench`` there; otherwise it runs here,
and measures impl and the spec alone if SGLang is missing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from prefixspec.commands.options import positive_int
from prefixspec.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
BENCH_VENV = ROOT / ".venv-bench"
BENCH_PYTHON = BENCH_VENV / "bin" / "python"


def add_bench_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "bench",
        help="benchmark impl against SGLang's RadixCache and the spec; write docs/perf.md (make bench installs SGLang)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke test of every step; writes under --results only")
    parser.add_argument("--reps", type=positive_int, default=None, help="repetitions of each measurement (default 7)")
    parser.add_argument("--no-sglang", action="store_true", help="measure impl and the spec only")
    parser.add_argument("--results", default=None, help="directory of the raw results (default bench/results)")
    parser.add_argument("--docs", default=None, help="directory of perf.md and its plots (default docs)")
    parser.set_defaults(run=command_bench)


def forwarded(arguments: argparse.Namespace) -> list[str]:
    """The options again, for ``python -m bench``."""
    words: list[str] = []
    if arguments.quick:
        words.append("--quick")
    if arguments.reps is not None:
        words += ["--reps", str(arguments.reps)]
    if arguments.no_sglang:
        words.append("--no-sglang")
    if arguments.results is not None:
        words += ["--results", str(Path(arguments.results).resolve())]
    if arguments.docs is not None:
        words += ["--docs", str(Path(arguments.docs).resolve())]
    return words


def command_bench(arguments: argparse.Namespace) -> int:
    if not (ROOT / "bench" / "run.py").is_file():
        raise UsageError(f"prefixspec bench needs the bench/ folder of a source checkout, not found under {ROOT}")
    in_bench_venv = Path(sys.prefix).resolve() == BENCH_VENV.resolve()
    if not arguments.no_sglang and importlib.util.find_spec("sglang") is None and BENCH_PYTHON.exists() and not in_bench_venv:
        return subprocess.run([str(BENCH_PYTHON), "-m", "bench", *forwarded(arguments)], cwd=ROOT, check=False).returncode
    module = importlib.import_module("bench.run")
    run_command: Callable[[argparse.Namespace], int] = module.run_command
    return run_command(arguments)
