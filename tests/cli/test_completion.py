"""Shell completion (docs/configuration.md): the scripts bash, zsh and fish source, and a real
completion of a command name and of an option."""

from __future__ import annotations

import pytest

from helpers import run_cli


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_a_completion_script(shell):
    result = run_cli(env={"_TFPERF_COMPLETE": f"{shell}_source"}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "_tfperf_completion" in result.stdout
    assert "_TFPERF_COMPLETE" in result.stdout


def test_bash_completes_a_command_and_an_option():
    env = {"_TFPERF_COMPLETE": "bash_complete", "COMP_WORDS": "tfperf tu", "COMP_CWORD": "1"}
    result = run_cli(env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["plain,tune"]
    env.update(COMP_WORDS="tfperf tune --max-t", COMP_CWORD="2")
    assert run_cli(env=env, timeout=60).stdout.split() == ["plain,--max-trials"]
