"""The CLI's shared behaviour: version, usage errors, and the exit-code contract of ``main``."""

from __future__ import annotations

import click
import pytest

from tfperf import __version__
from tfperf.cli import app, main
from tfperf.core.errors import EXIT_FAIL_ON, EXIT_USAGE, FailOnTriggered, UserError


def test_version_prints_the_package_version(cli):
    result = cli("--version")
    assert result.returncode == 0
    assert __version__ in result.stdout


def test_unknown_command_is_a_usage_error(cli):
    result = cli("no-such-command")
    assert result.returncode == EXIT_USAGE
    assert "No such command" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("exc", "code", "prefix"),
    [
        (UserError("Install it with pip install tensorflow[and-cuda]."), EXIT_USAGE, "error:"),
        (FailOnTriggered("2 findings at severity warn or above."), EXIT_FAIL_ON, "fail-on:"),
    ],
)
def test_main_turns_library_errors_into_one_line_and_an_exit_code(capsys, exc, code, prefix):
    @click.command("raise-it")
    def raise_it() -> None:
        raise exc

    app.add_command(raise_it)
    try:
        assert main(["raise-it"]) == code
    finally:
        app.commands.pop("raise-it")
    err = capsys.readouterr().err
    assert err.startswith(prefix)
    assert str(exc) in " ".join(err.split())
    assert "Traceback" not in err
