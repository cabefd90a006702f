"""vLLM's part of ``make engines``: the real KVCacheManager through the kit, and its section of docs/engines.md.

For ``examples.vllm.adapter:make_cache`` (``make engines-vllm`` runs it in ``.venv-vllm``):

1. ``prefixspec check --rules strict`` (ci profile): vLLM must differ, each stage with a short
   counterexample, and the rules they name are listed;
2. ``prefixspec check --rules vllm`` (ci profile): it must pass every stage, with namespaces and
   events checked (every event of ``SHOWN_EVENTS`` reached);
3. ``prefixspec identify``: it must name ``vllm``.

``vllm_section`` returns the rows and prose as an ``examples.matrix.EngineSection``; ``main`` runs it
alone and prints the section (``python -m examples.vllm.engines``), exit 0 when every expectation holds.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from spec.api import RULE_PRESETS, CacheFactory
from examples.matrix import EngineSection, MatrixRow, render_matrix
from examples.vllm.loading import import_failure, load_vllm
from prefixspec.formats.trace import read_trace
from prefixspec.running.identify import Difference, Verdict, identify, show_differences
from prefixspec.running.report import CheckReport
from prefixspec.running.parallel import available_cores
from prefixspec.running.stage_workers import run_check_in_workers
from prefixspec.running.stages import RunPlan, run_check
from prefixspec.vocabulary import counted

ROOT = Path(__file__).resolve().parents[2]
TARGET = "examples.vllm.adapter:make_cache"
ENGINE = "vLLM 0.32.0 KVCacheManager"

REACH = True
"""Whether the check under ``vllm`` runs the reach stages (extremes, scale); off, the page says they were not run."""

REACH_NOTE = "turned off in `examples/vllm/engines.py` (`REACH`)."

SHOWN_EVENTS = ("a namespace other than the default", "one prompt in two namespaces", "events taken")
"""The coverage events of R12 and R13 the check under ``vllm`` must reach."""

SOURCE_LINES = """\
What vLLM 0.32.0 does, read line by line (`vllm/v1/core/` of the CPU wheel), and the variant of the kit that states it:

- **R8 `unit=block`, order by release (`use=release`).** vLLM evicts by allocating: `BlockPool.get_new_blocks(n)`
  pops exactly n blocks from the head of the free queue (`block_pool.py:666-700`, `kv_cache_utils.py:335-377`) and
  drops their hashes (`_maybe_evict_cached_block`, `block_pool.py:729-750`), so a leaf is cut, never freed whole.
  A finished request is freed tail first (`single_type_kv_cache_manager.py:588-589`, "so that the tail blocks are
  evicted first", `kv_cache_manager.py:620-629`), and `free_blocks` appends each cached block whose reference count
  falls to zero to the queue's tail (`block_pool.py:774-803`): insert 5 blocks, `evict 5` gives `[4 3 2 1 0]`.
- **R7 `use=release`.** A lookup touches nothing: `get_computed_blocks` only reads the hash map
  (`kv_cache_manager.py:264-321`); `touch` comes with an allocation (`single_type_kv_cache_manager.py:303-304`,
  `block_pool.py:752-768`), which takes the block out of the queue. A block's place in the eviction order is when
  its reference count last fell to zero: insert A, lock A, insert B, unlock A: A is the most recent.
- **R5 `dup=keep`.** A request is looked up once, at admission (`get_computed_blocks`, whose
  `max_cache_hit_length = num_tokens - 1`, `kv_cache_manager.py:295`, leaves a prompt's last block to compute);
  every block it computes is cached, even where its hash is cached already ("We currently don't de-duplicate the
  blocks in the cache", `block_pool.py:48-52`; `insert`, lines 85-99): one 4-token prompt served three times caches
  three copies of its block, a `BlockStored` each under one hash, and evicting one copy publishes `BlockRemoved`
  while another still serves hits (`get_one_block`, lines 62-71).
- **R12, R13.** The namespace is the request's `cache_salt`, which seeds the first block's hash
  (`kv_cache_utils.py:647-651`) and reaches `BlockStored.extra_keys` (`to_event_extra_keys`, lines 666-692);
  the events carry hashes and tokens, never block ids (`block_pool.py:363-374`, 617-624): the adapter maps them to
  ids as a router would.
"""


@dataclass
class VllmRun:
    strict: CheckReport | None = None
    vllm: CheckReport | None = None
    identified: list[str] = field(default_factory=list)
    identify_lines: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    """Each field of the rule set where ``vllm`` differs from ``strict``, shown alone (``every_difference``)."""
    seconds: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def calls_of(report: CheckReport) -> int:
    return sum(stage.calls for stage in report.stages)


def differing_stages(report: CheckReport) -> list[tuple[str, int, str, str]]:
    """(stage, calls, rule, trace text) of each failed stage with a counterexample."""
    found = []
    for stage in report.stages:
        if stage.counterexample:
            text = "\n".join(step.text() for step in read_trace(stage.counterexample).steps)
            found.append((stage.name, stage.counterexample_calls, stage.rule, text))
    return found


def strict_verdict(report: CheckReport) -> str:
    if report.passed:
        return "PASSED"
    stages = differing_stages(report)
    if not stages:
        return "FAILED, no counterexample"
    shortest = min(calls for _, calls, _, _ in stages)
    rules = sorted({rule.split(",")[0] for _, _, rule, _ in stages if rule})
    return f"differs: {counted(shortest, 'call')}, {'/'.join(rules) or 'see the traces'}"


def run_vllm(out: Path, progress: bool) -> VllmRun:
    """The three checks; ``problems`` lists every expectation that failed."""
    from examples.vllm.adapter import make_cache  # imports vLLM (about 20 s)

    run = VllmRun()
    base = replace(RunPlan.of_profile("ci"), replay_target=f"--target {TARGET}")

    def say(text: str) -> None:
        if progress:
            print(f"  vLLM: {text}", file=sys.stderr, flush=True)

    say("under strict ...")
    started = time.perf_counter()
    run.strict = run_check(make_cache, target_name=TARGET, plan=replace(base, out_dir=out / "strict"))
    run.seconds["strict"] = time.perf_counter() - started
    stages = differing_stages(run.strict)
    if run.strict.passed:
        run.problems.append("passed under strict, where vLLM differs by design (R5, R7, R8)")
    elif not stages or max(calls for _, calls, _, _ in stages) > 10:
        run.problems.append(f"under strict the counterexamples are {[calls for _, calls, _, _ in stages]} calls long, not a few")

    say("under vllm ...")
    started = time.perf_counter()
    # As `prefixspec check` runs it: its stages side by side on the cores this process may use (the same report).
    run.vllm = run_check_in_workers(
        make_cache,
        target_name=TARGET,
        plan=replace(
            base, rules=RULE_PRESETS["vllm"], out_dir=out / "vllm", replay_target=f"--target {TARGET} --rules vllm", reach=REACH, jobs=available_cores()
        ),
    )
    run.seconds["vllm"] = time.perf_counter() - started
    if not run.vllm.passed:
        run.problems.append(f"failed under --rules vllm: {[stage.rule or stage.name for stage in run.vllm.stages if not stage.passed]}")
    for event in SHOWN_EVENTS:
        if not any(stage.events.get(event) for stage in run.vllm.stages):
            run.problems.append(f"under --rules vllm the check never reached {event!r}")

    say("identify ...")
    started = time.perf_counter()
    verdicts = identify(make_cache, target_name=TARGET, base=replace(base, out_dir=out / "identify"))
    run.seconds["identify"] = time.perf_counter() - started
    run.identified = [verdict.rules.name for verdict in verdicts if verdict.conforms]
    run.identify_lines = [verdict.line() for verdict in verdicts]
    run.identify_lines += [f"conforms to: {', '.join(run.identified) or 'none of the presets'}"]
    run.identify_lines += [f"  {verdict.rules.name}: {verdict.rules.text}" for verdict in verdicts if verdict.conforms]
    if "vllm" not in run.identified:
        run.problems.append(f"identify named {run.identified}, not vllm")

    say("each rule where vllm differs from strict ...")
    started = time.perf_counter()
    run.differences = every_difference(make_cache, base, out, verdicts)
    run.seconds["differences"] = time.perf_counter() - started
    for difference in run.differences:
        if difference.verdict.conforms:
            run.problems.append(f"{difference.field.key}={difference.preset_variant} put back did not show a difference")
    say("ok" if not run.problems else "; ".join(run.problems))
    return run


def every_rule(differences: list[Difference]) -> str:
    """The rules ``every_difference`` showed, for the strict row: ``; each rule: R5 dup=keep, ...``."""
    shown = [f"{difference.field.rule} {difference.field.key}={difference.found_variant}" for difference in differences if not difference.verdict.conforms]
    return f"; each rule: {', '.join(shown)}" if shown else ""


def every_difference(make_cache: CacheFactory, base: RunPlan, out: Path, verdicts: list[Verdict]) -> list[Difference]:
    """Under ``strict`` each stage stops at its first difference, so one rule hides the others.  Here each field on
    which ``vllm`` differs from ``strict`` is shown alone (``identify.show_differences``): a short check of the adapter
    under ``vllm`` with that one field ``strict``'s (or ``strict`` itself where the mix has no meaning) must differ,
    and its shortest counterexample names that rule.  ``verdicts``: identify's short checks, reused."""
    tried = {verdict.rules: verdict for verdict in verdicts}
    return show_differences(
        make_cache, target_name=TARGET, base=replace(base, out_dir=out / "differences"), preset=RULE_PRESETS["strict"], found=RULE_PRESETS["vllm"], tried=tried
    )


def in_checkout(line: str) -> str:
    """A report line with the checkout's paths relative to it (the page is read in any checkout)."""
    return line.replace(f"{ROOT}/", "")


def section_of(run: VllmRun, version: str, torch_version: str) -> EngineSection:
    assert run.strict is not None and run.vllm is not None
    rows = (
        MatrixRow(ENGINE, "make_cache", "strict", strict_verdict(run.strict) + every_rule(run.differences), calls_of(run.strict), run.seconds["strict"]),
        MatrixRow(ENGINE, "make_cache", "vllm", ("PASSED" if run.vllm.passed else strict_verdict(run.vllm)) + ("" if REACH else " (reach stages not run)"), calls_of(run.vllm), run.seconds["vllm"]),
        MatrixRow(ENGINE, "make_cache", "identify", f"names {', '.join(run.identified) or 'none'}", 0, run.seconds["identify"]),
    )
    lines = [
        f"vLLM {version} (CPU wheel, torch {torch_version}) through `examples/vllm/adapter.py`: its real `KVCacheManager`",
        "and `BlockPool`, driven as vLLM's scheduler drives them (an insert is a request served and freed, a lock a",
        "request holding blocks, an eviction `get_new_blocks`); the adapter maps ids, nodes, namespaces (`cache_salt`)",
        "and hash-keyed events, and fixes no behaviour. `make engines-vllm` builds `.venv-vllm` and runs this.",
        "",
        SOURCE_LINES,
        "### The differences under `strict`",
        "",
    ]
    for stage, calls, rule, text in differing_stages(run.strict):
        lines += [f"{stage}, {counted(calls, 'call')} ({rule}):", "", "```", text, "```", ""]
    lines += [
        "### Every rule where vLLM differs from `strict`",
        "",
        "Each stage under `strict` stops at its first difference, so one rule hides the others. Each field on which",
        "`vllm` differs from `strict`, put back alone (`vllm` with that field `strict`'s), must differ, and its",
        f"shortest counterexample names the rule ({run.seconds.get('differences', 0.0):.0f} s):",
        "",
        "```",
        *[in_checkout(difference.line()) for difference in run.differences],
        "```",
        "",
    ]
    lines += ["### Under `vllm`", ""]
    reached = {event: sum(stage.events.get(event, 0) for stage in run.vllm.stages) for event in SHOWN_EVENTS}
    lines.append(
        f"{'PASSED' if run.vllm.passed else 'FAILED'}: {calls_of(run.vllm):,} calls in {len(run.vllm.stages)} stages, "
        f"{run.seconds['vllm']:.0f} s, its stages side by side in {available_cores()} worker processes; " + ", ".join(f"{event!r} {count:,}" for event, count in reached.items()) + "."
    )
    if not REACH:
        lines += ["", f"The reach stages (extremes, scale) were not run: {REACH_NOTE}"]
    lines += ["", "### `identify`", "", "```", *map(in_checkout, run.identify_lines), "```", ""]
    lines += [
        "### Upstream",
        "",
        "No defect of vLLM was found: every difference from `strict` is vLLM's design, stated as a variant. One thing a",
        "router should know: `BlockRemoved` names a hash, and where copies share it (R5 `dup=keep`) it cannot say which",
        "copy went; a router that drops the hash on the first `BlockRemoved` forgets a prefix another copy still serves.",
    ]
    return EngineSection(f"vLLM {version} `KVCacheManager`", rows, "\n".join(lines))


def vllm_section(out: Path, progress: bool) -> EngineSection:
    """vLLM's rows and prose for docs/engines.md (RuntimeError when vLLM does not import here)."""
    vllm = load_vllm()
    if vllm is None:
        raise RuntimeError(f"vLLM cannot be imported here ({import_failure()}): make engines-vllm installs it into .venv-vllm")
    run = run_vllm(out, progress)
    section = section_of(run, vllm.version, vllm.torch_version)
    if run.problems:
        section = EngineSection(section.title, section.rows, section.prose + "\n\nExpectations that failed: " + "; ".join(run.problems) + "\n")
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.vllm.engines", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default=str(ROOT / "counterexamples" / "engines" / "vllm"), help="where counterexamples go")
    arguments = parser.parse_args(argv)
    vllm = load_vllm()
    if vllm is None:
        print(f"make engines-vllm: vLLM cannot be imported here ({import_failure()}); make .venv-vllm/.installed builds it", file=sys.stderr)
        return 2
    started = time.perf_counter()
    run = run_vllm(Path(arguments.out), progress=True)
    section = section_of(run, vllm.version, vllm.torch_version)
    print(f"## {section.title}\n\n{render_matrix(section.rows)}\n\n{section.prose}")
    print(f"make engines-vllm: {time.perf_counter() - started:.0f} s; " + ("every expectation holds" if not run.problems else "; ".join(run.problems)))
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
