"""``make engines``: every real engine through the kit, and ``docs/engines.md`` with its one matrix.

Gathers each engine's ``examples.matrix.EngineSection``:

- SGLang's plain ``RadixCache`` (``examples/sglang/engines.py``, ``radix_section``);
- SGLang's ``UnifiedRadixCache`` on its Rust and its Python TreeCore (``examples/sglang/unified_engines.py``,
  ``unified_section``), and the two cores against each other (``cores_section``, ``cores``);
- vLLM's ``KVCacheManager`` (``examples/vllm/engines.py``, ``vllm_section``), which needs vLLM's own
  venv: when ``.venv-vllm`` exists it runs there as a subprocess (``--section vllm``) that hands its
  section back as JSON; when neither that venv nor an importable ``examples.vllm.engines`` is here,
  the page says so.

- the defects found in SGLang, as short upstream reports with their replays (``defects``).

The SGLang sections run in this process (``.venv-bench``).  Each section (and the unified cache's
section after each of its rows) is saved as JSON under ``OUT/sections/``, and the page is rendered
from every saved part after each: a full run (no ``--only``, ``--policy`` or ``--core``) starts from
none; a narrowed run replaces its own part and keeps the others', so narrowed runs side by side (in
processes of their own) fill one page.  Exit 0 when every expectation of this run holds, 1 when one
does not, 2 when nothing could run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from examples.matrix import EngineSection, MatrixRow, render_page

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
SECTIONS = ("radix", "unified", "cores", "defects", "vllm")
ORDER = {"radix": 0, "unified": 1, "cores": 2, "defects": 3, "vllm": 4}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def section_to_json(section: EngineSection, problems: list[str]) -> str:
    """A part as saved, with when it finished and the machine's load then (the page lists both: narrowed runs
    fill one page at different times, and on a shared machine the seconds mean little without the load)."""
    finished = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0
    return json.dumps({"title": section.title, "rows": [asdict(row) for row in section.rows], "prose": section.prose, "problems": problems, "finished": finished, "load": load})


def run_note(path: Path) -> str:
    """When the part saved at ``path`` finished and the load then, as the page lists it (a part saved without
    them: when its file was written, the load unknown)."""
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if "finished" not in loaded:
        return f"saved {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(path.stat().st_mtime))}, load not recorded"
    return f"finished {loaded['finished']}, load average {float(loaded['load']):.1f} on {os.cpu_count()} cores"


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


POLICY_ORDER = ("lru", "lfu", "slru", "priority", "tlru", "fifo", "mru", "filo")
"""SGLang's policies as the page lists them: the server's choices, then the library's."""


def part_order(stem: str) -> tuple[int, int, str]:
    """Where a part kept as ``stem`` (``unified-lfu-rust``) goes: by section, then by the first policy it names."""
    words = stem.split("-")
    policy = next((POLICY_ORDER.index(word) for word in words[1:] if word in POLICY_ORDER), len(POLICY_ORDER))
    return (ORDER.get(words[0], 9), policy, stem)


def merged(sections: list[EngineSection]) -> list[EngineSection]:
    """Parts of one section (narrowed runs of it) as one: their rows in order, and each paragraph of their prose
    once, where it first appears (the parts share their explanations; what one part adds follows)."""
    by_title: dict[str, list[EngineSection]] = {}
    for section in sections:
        by_title.setdefault(section.title, []).append(section)
    folded = []
    for title, parts in by_title.items():
        paragraphs: list[str] = []
        for part in parts:
            for paragraph in part.prose.strip().split("\n\n"):
                if paragraph not in paragraphs:
                    paragraphs.append(paragraph)
        folded.append(EngineSection(title, tuple(row for part in parts for row in part.rows), "\n\n".join(paragraphs)))
    return folded


def render(parts: Path, page: Path, seconds: float | None) -> None:
    """The page from every part kept in ``parts`` (the parts of one section merged, ``merged``); a section with no
    part says how to add it.  ``seconds`` is the run's; None (a page rendered from parts alone) counts the seconds
    of every row."""
    kept = sorted(parts.glob("*.json"), key=lambda path: part_order(path.stem))
    sections = merged([section_from_json(path.read_text(encoding="utf-8"))[0] for path in kept])
    notes = [f"- `{path.stem}`: {run_note(path)}" for path in kept]
    if seconds is None:
        seconds = sum(row.seconds for section in sections for row in section.rows)
    missing = [name for name in SECTIONS if not any(path.stem.split("-")[0] == name for path in kept)]
    if missing:
        sections.append(
            EngineSection(
                "Not on this page",
                (),
                "\n".join(f"- `{name}`: no run has kept it yet (`make engines ENGINES_ARGS=\"--only {name}\"` adds it)." for name in missing),
            )
        )
    if notes:
        sections.append(EngineSection("When each part ran", (), "Each part is one run of `make engines` (narrowed with `ENGINES_ARGS`) or a part of one; a part's name says how it "
            "was narrowed (`unified-lru-both`: the unified cache under `lru` alone, on both cores), and the policies it "
            "names are the only ones its rows cover:\n\n" + "\n".join(notes)))
    rendered = page.with_name(f".{page.name}.{os.getpid()}")
    rendered.write_text(render_page(sections, seconds), encoding="utf-8")
    rendered.replace(page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.engines", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=SECTIONS, action="append", help="only these sections (default all)")
    parser.add_argument("--policy", action="append", help="only these SGLang policies (default every one each section takes)")
    parser.add_argument("--core", choices=("rust", "python"), action="append", help="only these TreeCores of the unified cache (default both)")
    parser.add_argument("--out", default=str(ROOT / "counterexamples" / "engines"), help="where counterexamples go")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "engines.md"), help="where the page goes")
    parser.add_argument("--render", action="store_true", help="run nothing: render the page from the parts kept")
    parser.add_argument("--section", choices=("vllm",), help=argparse.SUPPRESS)  # the subprocess of vllm_section
    arguments = parser.parse_args(argv)
    out = Path(arguments.out)
    if arguments.render:
        if not list((out / "sections").glob("*.json")):
            say(f"make engines: no part is kept under {out / 'sections'}")
            return 2
        render(out / "sections", Path(arguments.docs), None)
        return 0
    if arguments.section == "vllm":
        found = vllm_in_process(out)
        if found is None:
            return 2
        print(section_to_json(*found))
        return 0
    started = time.perf_counter()
    parts = out / "sections"
    narrowed = bool(arguments.only or arguments.policy or arguments.core)
    if not narrowed and parts.is_dir():
        for stale in parts.glob("*.json"):
            stale.unlink()
    parts.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    def save(key: str, section: EngineSection, unmet: list[str]) -> None:
        """Keep the part ``key`` and render the page from every part kept."""
        written = parts / f".{key}.{os.getpid()}"
        written.write_text(section_to_json(section, unmet), encoding="utf-8")
        written.replace(parts / f"{key}.json")  # whole or not at all, for the runs beside this one that read it
        render(parts, Path(arguments.docs), None if narrowed else time.perf_counter() - started)  # narrowed: the rows' sum

    policy_key = "-".join(arguments.policy or ["all"])
    chosen = arguments.only or list(SECTIONS)
    if "radix" in chosen:
        from examples.sglang.engines import radix_section
        from examples.sglang.adapter import POLICIES

        policies = [policy for policy in arguments.policy or [*POLICIES, "tlru"] if policy in (*POLICIES, "tlru")]  # tlru: a row that says why not
        if policies:
            say("SGLang RadixCache ...")
            section, unmet = radix_section(out / "radix", True, policies)
            save(f"radix-{policy_key}", section, unmet)
            problems += unmet
    if "unified" in chosen:
        from examples.sglang.unified_engines import unified_section

        say("SGLang UnifiedRadixCache ...")
        key = f"unified-{policy_key}-{'-'.join(arguments.core or ['both'])}"
        section, unmet = unified_section(out / "unified", True, arguments.policy, arguments.core, lambda part, found: save(key, part, found))
        save(key, section, unmet)
        problems += unmet
    if "cores" in chosen:
        from examples.sglang.unified_engines import cores_section

        say("SGLang's two TreeCores side by side ...")
        section, unmet = cores_section(True, arguments.policy)
        save(f"cores-{policy_key}", section, unmet)
        problems += unmet
    if "defects" in chosen:
        from examples.sglang.unified_engines import defects_section

        say("SGLang defects' replays ...")
        section, unmet = defects_section()
        save("defects", section, unmet)
    if "vllm" in chosen:
        section, unmet = vllm_section(out / "vllm")
        save("vllm", section, unmet)
        problems += unmet
    kept = list(parts.glob("*.json"))
    if not kept:
        say("make engines: no engine could run here")
        return 2
    say(f"make engines: {len(kept)} parts on the page in {time.perf_counter() - started:.0f} s, {arguments.docs} written; " + ("every expectation holds" if not problems else f"{len(problems)} unmet: " + "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
