"""A catalogue's mutant checked under a rule set is made under it, the same way by hunt, check, replay and identify.

The hunt makes a mutant of a factory that takes a rule set (``impl.RadixCache``) under ``--rules``, and writes
``prefixspec replay DIR/ID.trace --target CATALOGUE#ID --rules R`` to reproduce it; the replay and check made
the mutant under strict instead, so that line failed at the first call on every trace, for a mutant that was
not the hunt's.  A factory without a rule set of its own to take (a user's package that follows one) was
called with one by the hunt, which stopped with its TypeError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spec.api import RULE_PRESETS, CacheFactory
from prefixspec.commands.main import build_parser, main, run_command
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import RunPlan
from prefixspec.targets.mutants import DEFAULT_CATALOGUE

NO_OP = 'id = "{id}"\nbug = "a comment, nothing planted"\nfile = "{file}"\nfind = "{find}"\nreplace = "{find}  # planted nothing"\n'


def catalogue(folder: Path, package: str, factory: str, file: str, find: str) -> Path:
    """A catalogue of one mutant that changes nothing the cache does (``a``)."""
    path = folder / "planted.toml"
    path.write_text(f'package = "{package}"\nfactory = "{factory}"\n[[mutant]]\n' + NO_OP.format(id="a", file=file, find=find), encoding="utf-8")
    return path


def one_insert_under_vllm(folder: Path) -> Path:
    """One insert under ``vllm``, whose snapshot lists its blocks as released (use=release): a cache made under
    strict releases nothing, so it fails the trace at its only call."""
    path = folder / "insert.trace"
    path.write_text("prefixspec-trace 1\nblock_size 2\nrules vllm\nn1 = insert [1 2 3 4] [5 6] -> new []\n", encoding="utf-8")
    return path


def test_a_replay_makes_a_mutant_under_the_traces_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """s07 (a lock that pins nothing) makes no difference to one insert: made under vllm it replays the trace; the
    control, impl made under strict, fails it (what the mutant did before)."""
    trace = one_insert_under_vllm(tmp_path)
    assert main(["replay", str(trace), "--target", f"{DEFAULT_CATALOGUE}#s07"]) == 0
    assert main(["replay", str(trace), "--target", "impl:RadixCache"]) == 1
    assert "released" in capsys.readouterr().out


def test_check_makes_a_mutant_under_its_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mutant that plants nothing passes check under vllm, made under it; made under strict it failed at once."""
    planted = catalogue(tmp_path, "impl", "RadixCache", "cache.py", "    def take_events(self) -> list[KVEvent]:")
    status = main(["check", f"{planted}#a", "--rules", "vllm", "--profile", "dev", "--stage", "golden-trace", "--quiet", "--out", str(tmp_path)])
    assert status == 0, capsys.readouterr().out


def test_a_factory_that_takes_no_rules_is_hunted_as_it_makes_its_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's package whose factory makes sglang-lfu caches: hunted under sglang-lfu its mutant that plants
    nothing survives (it stopped with make()'s TypeError, given a rule set); the control, under strict, kills it."""
    package = tmp_path / "lfu_cache"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from impl import RadixCache\nfrom spec.api import RULE_PRESETS\n\n\ndef make(block_size):\n"
        '    return RadixCache(block_size, RULE_PRESETS["sglang-lfu"])\n',
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    planted = catalogue(tmp_path, "lfu_cache", "make", "__init__.py", "def make(block_size):")
    arguments = ["hunt", str(planted), "--stage", "golden-trace", "--quiet", "-j", "1"]
    assert main([*arguments, "--rules", "sglang-lfu", "--out", str(tmp_path / "lfu")]) == 1  # it survives: exit 1
    assert main([*arguments, "--out", str(tmp_path / "strict")]) == 0  # killed under strict


def test_identify_makes_a_mutant_under_each_rule_set_it_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each short check of a mutant's identify gets caches made under its own rule set (they release blocks under
    vllm alone), so the replay lines it writes (``--target CATALOGUE#ID --rules R``) make the cache that ran."""
    import prefixspec.running.identify as identifying

    released: dict[str, bool] = {}

    def run_check(factory: CacheFactory, *, target_name: str, plan: RunPlan) -> CheckReport:
        cache = factory(2)
        cache.insert([1, 2, 3, 4], [5, 6])
        released[plan.rules.name] = bool(cache.snapshot().released)
        return CheckReport(target_name, "ci", None, [])

    monkeypatch.setattr(identifying, "run_check", run_check)
    planted = catalogue(tmp_path, "impl", "RadixCache", "cache.py", "    def take_events(self) -> list[KVEvent]:")
    # In this process (unsupervised), where the stub's record is read: main runs the command in a child.
    assert run_command(build_parser().parse_args(["identify", f"{planted}#a", "--quiet", "--out", str(tmp_path / "out")])) == 0
    assert released == {name: rules.use == "release" for name, rules in RULE_PRESETS.items()}
    assert "a catalogue's mutant, made under each rule set it is held to" in capsys.readouterr().out
