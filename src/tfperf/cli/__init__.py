"""The ``tfperf`` command line: a thin layer over the library API.

Contract: every command lives in its own module under :mod:`tfperf.cli` that exposes
``register(group)``; the command calls a library function and renders its result. Exit codes
are the same for every command (see :mod:`tfperf.core.errors`): 0 ok, 1 a ``--fail-on`` condition
met, 2 bad input or a missing prerequisite. Every command takes ``-q``/``-v``
(:mod:`tfperf.cli.verbosity`), and its defaults come from a configuration file where one is
found (:mod:`tfperf.cli.settings`, applied as click's ``default_map``, so flags win). Nothing
here imports TensorFlow, and heavy libraries (numpy, scipy, plotly) are imported inside the
commands that need them, so ``tfperf --help`` stays instant.
"""

from __future__ import annotations

# The library behind each command is imported inside it: `tfperf --help` stays instant and
# loads neither numpy, scipy nor plotly.
import importlib
import sys

import click

from tfperf import __version__
from tfperf.cli.verbosity import add_options
from tfperf.core.errors import EXIT_FAIL_ON, EXIT_USAGE, FailOnTriggered, UserError

COMMAND_MODULES = ("doctor", "bench", "tune", "runs", "pipeline", "builds", "fleet")
"""Modules under :mod:`tfperf.cli` whose ``register(group)`` adds their commands."""


@click.group(
    name="tfperf",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="tfperf")
@click.pass_context
def app(ctx: click.Context) -> None:
    """Make TensorFlow run as fast as this machine allows: audit, measure, tune, apply.

    Defaults come from tfperf.toml or [tool.tfperf] in pyproject.toml (docs/configuration.md).
    """
    from tfperf.cli import settings

    if ctx.default_map is None:  # before the command's context: flags still beat the file
        ctx.default_map = settings.default_map(settings.load(), app)


for _name in COMMAND_MODULES:
    importlib.import_module(f"tfperf.cli.{_name}").register(app)
add_options(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; user errors become one line on stderr, exit 2."""
    from rich.markup import escape

    from tfperf.report.console import err_console

    try:
        result = app.main(args=argv, prog_name="tfperf", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        err_console().print("interrupted")
        return 130
    except UserError as exc:
        err_console().print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return EXIT_USAGE
    except FailOnTriggered as exc:
        err_console().print(f"[bold yellow]fail-on:[/] {escape(str(exc))}", soft_wrap=True)
        return EXIT_FAIL_ON
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
