"""``make engines``: every real engine through the kit, and ``docs/engines.md`` with its one matrix.

Gathers each engine's ``examples.matrix.EngineSection``:

- SGLang's plain ``RadixCache`` (``examples/sglang/engines.py``, ``radix_section``);
- SGLang's ``UnifiedRadixCache`` on its Rust and its Python TreeCore, and the two cores against
  each other (``examples/sglang/unified_engines.py``, ``unified_section``);
- vLLM's ``KVCacheManager`` (``examples/vllm/engines.py``, ``vllm_section``), which needs vLLM's own
  venv: when ``.venv-vllm`` exists it runs there as a subprocess (``--section vllm``) that hands its
  section back as JSON; when neither that venv nor an importable ``examples.vllm.engines`` is here,
  the page says so.

The SGLang sections run in this process (``.venv-bench``).  ``--only`` narrows the run to some
sections (the page then holds only those); ``--policy`` narrows SGLang's policies.  Exit 0 when every
section's expectations hold, 1 when one does not, 2 when nothing could run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from examples.matrix import EngineSection, MatrixRow, render_page

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
SECTIONS = ("radix", "unified", "vllm")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def section_to_json(section: EngineSection, problems: list[str]) -> str:
    return json.dumps({"title": section.title, "rows": [asdict(row) for row in section.rows], "prose": section.prose, "problems": problems})


def section_from_json(text: str) -> tuple[EngineSection, list[str]]:
    """A section written by ``section_to_json``; ValueError when the text is not one."""
    try:
        loaded: dict[str, Any] = json.loads(text)
        rows = tuple(MatrixRow(**row) for row in loaded["rows"])
        return EngineSection(str(loaded["title"]), rows, str(loaded["prose"])), [str(problem) for problem in loaded.get("problems", [])]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"not a section: {error}") from None


def vllm_in_process(out: Path) -> tuple[EngineSection, list[str]] | None:
    """vLLM's section from ``examples.vllm.engines`` in this process, or None when it is not importable here."""
    try:
        module = importlib.import_module("examples.vllm.engines")
    except ImportError:
        return None
    section = module.vllm_section(out, True)
    if isinstance(section, tuple):  # (section, problems)
        found, problems = section
        return found, list(problems)
    return section, []


def vllm_section(out: Path) -> tuple[EngineSection, list[str]]:
    """vLLM's section: in ``.venv-vllm`` when it exists, else here when importable, else a section that says why not."""
    title = "vLLM `KVCacheManager`"
    if VLLM_PYTHON.exists():
        say(f"vLLM: running in {VLLM_PYTHON.parent.parent.name} ...")
        run = subprocess.run(
            [str(VLLM_PYTHON), "-m", "examples.engines", "--section", "vllm", "--out", str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        if run.returncode == 2 or not run.stdout.strip():
            return EngineSection(title, (), f"Not run: `{VLLM_PYTHON.relative_to(ROOT)} -m examples.engines --section vllm` exited {run.returncode} without a section."), [f"vLLM did not run (exit {run.returncode})"]
        try:
            return section_from_json(run.stdout.strip().splitlines()[-1])
        except ValueError as error:
            return EngineSection(title, (), f"Not run: its subprocess wrote no section ({error})."), ["vLLM wrote no section"]
    found = vllm_in_process(out)
    if found is not None:
        return found
    return EngineSection(title, (), "Not run: neither `.venv-vllm` (`make .venv-vllm`) nor an importable `examples.vllm.engines` is here."), []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.engines", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=SECTIONS, action="append", help="only these sections (default all)")
    parser.add_argument("--policy", action="append", help="only these SGLang policies (default every one each section takes)")
    parser.add_argument("--core", choices=("rust", "python"), action="append", help="only these TreeCores of the unified cache (default both)")
    parser.add_argument("--out", default=str(ROOT / "counterexamples" / "engines"), help="where counterexamples go")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "engines.md"), help="where the page goes")
    parser.add_argument("--section", choices=("vllm",), help=argparse.SUPPRESS)  # the subprocess of vllm_section
    arguments = parser.parse_args(argv)
    out = Path(arguments.out)
    if arguments.section == "vllm":
        found = vllm_in_process(out)
        if found is None:
            return 2
        print(section_to_json(*found))
        return 0
    started = time.perf_counter()
    sections: list[EngineSection] = []
    problems: list[str] = []
    chosen = arguments.only or list(SECTIONS)
    if "radix" in chosen:
        from examples.sglang.engines import radix_section
        from examples.sglang.adapter import POLICIES

        policies = [policy for policy in arguments.policy or POLICIES if policy in POLICIES]
        if policies:
            say("SGLang RadixCache ...")
            section, unmet = radix_section(out / "radix", True, policies)
            sections.append(section)
            problems += unmet
    if "unified" in chosen:
        from examples.sglang.unified_engines import unified_section

        say("SGLang UnifiedRadixCache ...")
        section, unmet = unified_section(out / "unified", True, arguments.policy, arguments.core)
        sections.append(section)
        problems += unmet
    if "vllm" in chosen:
        section, unmet = vllm_section(out / "vllm")
        sections.append(section)
        problems += unmet
    if not any(section.rows for section in sections):
        say("make engines: no engine could run here")
        return 2
    page = render_page(sections, time.perf_counter() - started)
    Path(arguments.docs).write_text(page, encoding="utf-8")
    rows = sum(len(section.rows) for section in sections)
    say(f"make engines: {rows} rows in {time.perf_counter() - started:.0f} s, {arguments.docs} written; " + ("every expectation holds" if not problems else f"{len(problems)} unmet: " + "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
