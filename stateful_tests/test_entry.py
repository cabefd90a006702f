"""The console script's entry (``prefixspec.commands.entry``): a Ctrl-C while the commands still load is a stop.

The signal is sent by the process to itself as Python imports ``prefixspec.commands.main`` (an import hook
placed before it), so it arrives at that moment on any machine, however fast."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CTRL_C_WHILE_LOADING = """
import importlib.abc, os, signal, sys

class CtrlCWhileLoading(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "prefixspec.commands.main":
            os.kill(os.getpid(), signal.SIGINT)  # Python's own handler: KeyboardInterrupt at the next instruction
        return None

signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts, though a shell's & or nohup ignored SIGINT
sys.meta_path.insert(0, CtrlCWhileLoading())
"""


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_LOADING + code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_ctrl_c_while_the_commands_load_is_one_line_and_130() -> None:
    ran = run_python("from prefixspec.commands.entry import main\nsys.exit(main(['check', '--help']))")
    assert ran.returncode == 130, ran
    assert ran.stderr == "prefixspec: interrupted (Ctrl-C); nothing was reported\n"
    assert ran.stdout == ""


def test_without_the_entry_the_same_ctrl_c_is_a_traceback() -> None:
    """The negative control: the hook does interrupt the import, and loading ``commands.main`` directly (the
    console script's old target) lets the KeyboardInterrupt out as a traceback."""
    ran = run_python("from prefixspec.commands.main import main\nsys.exit(main(['check', '--help']))")
    assert ran.returncode != 0
    assert "Traceback" in ran.stderr and "KeyboardInterrupt" in ran.stderr


def test_the_entry_runs_the_command_line_when_nobody_presses_ctrl_c() -> None:
    ran = subprocess.run([sys.executable, "-m", "prefixspec", "check", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ran.returncode == 0 and "usage: prefixspec check" in ran.stdout


def test_the_console_script_and_python_m_both_go_through_the_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["prefixspec"] == "prefixspec.commands.entry:main"
    assert "from prefixspec.commands.entry import main" in (ROOT / "prefixspec" / "__main__.py").read_text()
