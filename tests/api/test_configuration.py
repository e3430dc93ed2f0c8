"""The library reads the project's configuration file as the command line does: a keyword
argument beats the environment (``TFPERF_STORE``), which beats the file, which beats the
built-in default. Through ``import tfperf`` only, in a folder holding a real ``tfperf.toml``.
"""

from __future__ import annotations

import json

import pytest

import tfperf
from helpers import fill_store, run_cli
from tfperf.store import Store


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with a tfperf.toml, as the working directory, TFPERF_STORE unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TFPERF_STORE", "")
    return tmp_path


def test_compare_uses_the_files_store_unless_the_environment_or_a_keyword_names_another(
    project, monkeypatch
):
    ids = fill_store(project / "team.sqlite")
    (project / "tfperf.toml").write_text('[compare]\nstore = "team.sqlite"\n')
    by_file = tfperf.compare(ids["run"], ids["run"])  # only the file names the store
    cli = run_cli("compare", str(ids["run"]), str(ids["run"]), "--json", cwd=project,
                  env={"TFPERF_STORE": ""})
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["comparisons"] == json.loads(by_file.to_json())["comparisons"]

    with Store.open(project / "empty.sqlite"):
        pass  # a store without runs
    monkeypatch.setenv("TFPERF_STORE", str(project / "empty.sqlite"))
    with pytest.raises(tfperf.UserError):  # the environment beats the file
        tfperf.compare(ids["run"], ids["run"])
    by_keyword = tfperf.compare(ids["run"], ids["run"], store=project / "team.sqlite")
    assert by_keyword.to_dict()["comparisons"] == by_file.to_dict()["comparisons"]


def test_a_bad_configuration_file_is_the_command_lines_sentence(project):
    (project / "tfperf.toml").write_text('max_trials = "ten"\n')
    with pytest.raises(tfperf.UserError, match=r'max_trials = "ten" in .*tfperf\.toml'):
        tfperf.compare(1, 2)


@pytest.mark.tf
@pytest.mark.slow
def test_tune_takes_the_files_limits_tolerance_and_runtimes_and_a_keyword_beats_them(project):
    (project / "tfperf.toml").write_text(
        'tolerance = "abs=1e-3"\nstore = "s.sqlite"\n[tune]\nmax_trials = 1\n'
        'runtimes = "tf,litert"\n'
    )
    result = tfperf.tune(workload="mlp", size="tiny", knobs="runtime", confirm_rounds=6,
                         tolerance="abs=2e-3", profile_out=project / "p.json", progress=False)
    doc = result.to_dict()
    assert doc["tolerance"]["abs"] == 2e-3  # the keyword, not the file
    assert doc["trials"] == 1 and [c["label"] for c in doc["candidates"]] == ["runtime=litert"]
    shown = run_cli("history", "--json", cwd=project, env={"TFPERF_STORE": ""})
    assert [r["id"] for r in json.loads(shown.stdout)["runs"]] == [result.run_id]
