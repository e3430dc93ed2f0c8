"""Defaults from tfperf.toml or ``[tool.tfperf]`` in pyproject.toml: found from the working
directory up, beaten by the environment and by flags, checked, and shown by ``doctor -v``.

Real files in a temporary folder used as the working directory of the real CLI.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import REPO, run_cli
from tfperf.cli import app
from tfperf.cli.settings import default_map, describe, load

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

NO_STORE_ENV = {"TFPERF_STORE": ""}
"""The tests' own TFPERF_STORE (conftest) would beat the file: an empty one counts as unset."""


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def _history_store(cwd: Path, *args: str, env: dict | None = None) -> str:
    result = run_cli("history", "--json", *args, cwd=cwd, env=env or NO_STORE_ENV, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["store"]


def test_a_store_in_tfperf_toml_is_the_default_and_a_flag_beats_it(tmp_path):
    _write(tmp_path, "tfperf.toml", 'store = "stores/team.sqlite"\n')
    deeper = tmp_path / "src" / "app"
    deeper.mkdir(parents=True)
    # relative to the file's folder, whichever subfolder the command runs in
    assert _history_store(deeper) == str(tmp_path / "stores" / "team.sqlite")
    mine = tmp_path / "mine.sqlite"
    assert _history_store(deeper, "--store", str(mine)) == str(mine)


def test_the_environment_beats_the_file(tmp_path):
    _write(tmp_path, "tfperf.toml", 'store = "file.sqlite"\n')
    env_store = str(tmp_path / "env.sqlite")
    assert _history_store(tmp_path, env={"TFPERF_STORE": env_store}) == env_store


def test_pyproject_tool_table_is_found_and_tfperf_toml_wins_beside_it(tmp_path):
    _write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n[tool.tfperf]\nstore = "p.sqlite"\n')
    assert _history_store(tmp_path) == str(tmp_path / "p.sqlite")
    _write(tmp_path, "tfperf.toml", 'store = "t.sqlite"\n')
    assert _history_store(tmp_path) == str(tmp_path / "t.sqlite")


def test_a_pyproject_without_a_tfperf_table_is_passed_by(tmp_path):
    _write(tmp_path, "tfperf.toml", 'store = "outer.sqlite"\n')
    inner = tmp_path / "pkg"
    _write(inner, "pyproject.toml", '[project]\nname = "pkg"\n[tool.ruff]\nline-length = 90\n')
    assert _history_store(inner) == str(tmp_path / "outer.sqlite")


def test_a_command_table_beats_the_top_level_value_for_that_command(tmp_path):
    _write(
        tmp_path,
        "tfperf.toml",
        """
        budget = 12
        max-trials = 5
        [bench]
        budget = 4
        """,
    )
    config = load(tmp_path)
    defaults = default_map(config, app, environ={})
    assert defaults["bench"]["budget"] == 4.0
    assert defaults["compare"]["budget"] == 12.0 and defaults["tune"]["budget"] == 12.0
    assert defaults["builds"]["compare"]["budget"] == 12.0
    assert defaults["tune"]["max_trials"] == 5 and "max_trials" not in defaults["bench"]
    # what a user sees: the file's value is the default the help shows
    shown = run_cli("bench", "--help", cwd=tmp_path, timeout=60).stdout
    assert "[default: 4.0]" in " ".join(shown.split())


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("speed = 3\n", ["unknown setting 'speed'", "tfperf.toml"]),
        ('max_trials = "ten"\n', ["max_trials", "whole number", "tfperf.toml"]),
        ("budget = -1\n", ["budget", "positive number of seconds"]),
        ('runtimes = ["tf", "fast"]\n', ["runtimes", "list of runtimes"]),
        ('tolerance = "fast"\n', ["tolerance", "relative error"]),
        ("processes = true\n", ["processes", "whole number"]),
        ("[nope]\nbudget = 3\n", ["[nope]", "names no tfperf command"]),
        ("[history]\nbudget = 3\n", ["tfperf history has no --budget", "[history]"]),
        ("budget = \n", ["not valid TOML"]),
    ],
)
def test_a_bad_configuration_file_is_one_sentence_and_exit_2(tmp_path, text, needles):
    path = _write(tmp_path, "tfperf.toml", text)
    result = run_cli("history", cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())
    assert message.startswith("error:") and str(path) in message
    for needle in needles:
        assert needle in message
    assert "Traceback" not in result.stderr


def test_a_bad_value_in_pyproject_names_its_table(tmp_path):
    _write(tmp_path, "pyproject.toml", "[tool.tfperf.tune]\nmax-trials = 0\n")
    result = run_cli("history", cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert "[tool.tfperf.tune]" in result.stderr and "max-trials = 0" in result.stderr


def test_describe_says_where_each_setting_comes_from(tmp_path):
    path = _write(
        tmp_path,
        "tfperf.toml",
        """
        tolerance = 0.05
        store = "s.sqlite"
        [tune]
        budget = 600
        """,
    )
    rows = {r.setting: r for r in describe(load(tmp_path), environ={"TFPERF_STORE": "/e.sqlite"})}
    assert (rows["tolerance"].value, rows["tolerance"].source) == ("0.05", str(path))
    assert (rows["store"].value, rows["store"].source) == ("/e.sqlite", "environment TFPERF_STORE")
    assert rows["max_trials"].source == "default"
    section = rows["budget (tune)"]
    assert (section.value, section.source) == ("600.0", f"{path} [tune]")


@pytest.mark.tf
@pytest.mark.slow
def test_doctor_verbose_shows_the_settings_and_their_sources(tmp_path):
    path = _write(tmp_path, "tfperf.toml", "tolerance = 0.05\nmax_trials = 4\n")
    result = run_cli("doctor", "-v", cwd=tmp_path, timeout=300)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("Settings"))
    table = lines[start:]
    assert f"tolerance 0.05 {path}" in table and f"max_trials 4 {path}" in table
    assert any(line.startswith("store ") and "environment TFPERF_STORE" in line for line in table)
    assert any(line.startswith("processes ") and line.endswith(" default") for line in table)
    assert f"configuration file: {path}" in table
    plain = run_cli("doctor", cwd=tmp_path, timeout=300)
    assert "Settings" not in plain.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_tune_takes_its_limits_and_tolerance_from_the_file(tmp_path):
    text = 'tolerance = "abs=1e-3"\nmax_trials = 1\nruntimes = "tf,litert"\n'
    _write(tmp_path, "tfperf.toml", text)
    result = run_cli(
        "tune",
        "--workload",
        "mlp",
        "--size",
        "tiny",
        "--knobs",
        "runtime",
        "--confirm-rounds",
        "6",
        "--json",
        "--profile-out",
        str(tmp_path / "profile.json"),
        cwd=tmp_path,
        env=NO_STORE_ENV | {"TFPERF_STORE": str(tmp_path / "s.sqlite")},
        timeout=500,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    assert doc["tolerance"]["abs"] == 1e-3 and doc["trials"] == 1
    assert [c["label"] for c in doc["candidates"]] == ["runtime=litert"]


def _doc_examples() -> list[tuple[str, str]]:
    """Every ```toml block of the docs and the README, as ``(where, text)``."""
    found = []
    for page in sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")]):
        blocks = re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        found += [(f"{page.name} #{i + 1}", text) for i, text in enumerate(blocks)]
    return found


DOC_EXAMPLES = _doc_examples()


def test_the_docs_have_toml_examples_to_test():
    assert len(DOC_EXAMPLES) >= 2  # the pyproject.toml and the tfperf.toml forms


@pytest.mark.parametrize(("where", "text"), DOC_EXAMPLES, ids=[w for w, _ in DOC_EXAMPLES])
def test_every_toml_example_in_the_docs_is_read_by_the_commands(tmp_path, where, text):
    # The block's first line names the file it belongs in (`# pyproject.toml`, `# tfperf.toml`).
    name = "pyproject.toml" if text.lstrip().startswith("# pyproject.toml") else "tfperf.toml"
    _write(tmp_path, name, text)
    data = tomllib.loads(text)
    table = data["tool"]["tfperf"] if name == "pyproject.toml" else data
    # a command run under it starts (exit 0) and takes the file's store
    store = table.get("store")
    shown = _history_store(tmp_path)
    assert shown == str(tmp_path / store) if store else shown
    # each table reaches the command it is named after, as that command's default
    defaults = default_map(load(tmp_path), app, environ={})
    for section, values in ((k, v) for k, v in table.items() if isinstance(v, dict)):
        for key, value in values.items():
            leaves = defaults[section]
            found = [leaves[key]] if key in leaves else [
                sub[key] for sub in leaves.values() if isinstance(sub, dict) and key in sub
            ]
            assert found and all(v == value for v in found), (where, section, key)
    if isinstance(table.get("bench"), dict) and "budget" in table["bench"]:
        helped = " ".join(run_cli("bench", "--help", cwd=tmp_path, timeout=60).stdout.split())
        assert f"[default: {float(table['bench']['budget'])}]" in helped
