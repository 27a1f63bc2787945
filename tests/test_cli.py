"""The mlsched command, called in-process through main([...])."""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from mlsched.cli import main
from mlsched.workloads import load_workload
from mlsched.workloads.trace import save_workload

_SMALL = ["--workload", "oasis-paper", "--jobs", "10", "--horizon", "30", "-W", "servers=4"]
_REQUIRED_SUMMARY = {
    "policy",
    "workload",
    "seed",
    "jobs",
    "admitted",
    "completed",
    "total_utility",
    "avg_jct",
    "p99_jct",
    "makespan",
    "utilization",
    "wall_seconds",
}


def test_policies_lists_fifo(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("fifo"))
    assert "first-in first-out" in line


def test_workloads_and_experiments_lists(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    assert "oasis-paper" in out and "demo" in out
    assert main(["experiments"]) == 0
    assert "baselines" in capsys.readouterr().out


def test_simulate_writes_summary_and_jobs(tmp_path: Path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", *_SMALL, "--policy", "fifo", "--seed", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fifo" in printed and "total utility" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= _REQUIRED_SUMMARY
    assert summary["policy"] == "fifo" and summary["workload"] == "oasis-paper"
    assert summary["seed"] == 2 and summary["jobs"] == 10
    with (out / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 10
    assert {
        "job_id",
        "arrival_slot",
        "state",
        "admitted",
        "completion_slot",
        "completion_time_s",
        "jct_s",
        "utility",
        "progress",
        "restarts",
        "price",
    } <= set(rows[0])


def test_simulate_is_deterministic(tmp_path: Path):
    for name in ("a", "b"):
        assert (
            main(
                [
                    "simulate",
                    "--workload",
                    "demo",
                    "--policy",
                    "fifo",
                    "--truth-noise",
                    "0.1",
                    "--truth-compute-scale",
                    "1.3",
                    "--restart-s",
                    "5",
                    "--out",
                    str(tmp_path / name),
                ]
            )
            == 0
        )
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    for key in ("total_utility", "completed", "avg_jct", "makespan"):
        assert a[key] == b[key]
    assert a["truth"]["compute_scale"] == 1.3
    assert a["metrics"]["model_error"] > 0  # the truth departs from the specs


def test_simulate_a_workload_file(tmp_path: Path, capsys):
    path = save_workload(load_workload("demo"), tmp_path / "demo.yaml")
    assert main(["simulate", "--workload", str(path), "--policy", "fifo", "--jobs", "4"]) == 0
    assert "4 jobs" in capsys.readouterr().out


def test_policy_options_reach_the_policy(tmp_path: Path):
    # One worker per job instead of up to 30 slows every job down: a plausible bug drops
    # -P on the floor and both runs look alike.
    jcts = []
    for extra in ([], ["-P", "max_workers=1"]):
        out = tmp_path / str(len(jcts))
        argv = ["simulate", "--workload", "demo", "--policy", "fifo", "--out", str(out)]
        assert main([*argv, *extra]) == 0
        jcts.append(json.loads((out / "summary.json").read_text())["avg_jct"])
    assert jcts[1] > jcts[0]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["simulate", "--workload", "demo", "--policy", "no-such-policy"], "no-such-policy"),
        (["simulate", "--workload", "no-such-workload", "--policy", "fifo"], "no-such-workload"),
        (["simulate", "--workload", "demo", "--policy", "fifo", "-W", "bogus=1"], "bogus"),
        (["simulate", "--workload", "demo", "--policy", "fifo", "-W", "novalue"], "KEY=VALUE"),
        (["simulate", "--workload", "demo", "--policy", "fifo", "-P", "bogus=1"], "bogus"),
        (["simulate", "--workload", "demo", "--policy", "pd_ors", "-P", "g_delta=-1"], "g_delta"),
        (["simulate", "--workload", "demo", "--policy", "fifo", "-P", "x"], "--policy-option"),
        (["experiment", "no-such-experiment"], "no-such-experiment"),
        (["demo", "--policy", "no-such-policy"], "no-such-policy"),
    ],
    ids=[
        "policy",
        "workload",
        "option",
        "option-syntax",
        "policy-option",
        "policy-option-value",
        "policy-option-syntax",
        "experiment",
        "demo-policy",
    ],
)
def test_unknown_names_exit_2_with_one_line(argv: list[str], needle: str, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.startswith("mlsched: error:")
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_bad_file_names_file_and_field(tmp_path: Path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "cluster": {"servers": [{"name": "s", "capacity": {"cpu": 4}}]},
                "jobs": [{"job_id": "a", "epochs": -1}],
            }
        )
    )
    assert main(["simulate", "--workload", str(path), "--policy", "fifo"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "jobs[0].epochs" in err and "Traceback" not in err


def test_bad_csv_row_names_the_row(tmp_path: Path, capsys):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"servers": [{"name": "s", "capacity": {"cpu": 4}}]}))
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,worker.cpu\na,1\nb,lots\n")
    assert (
        main(["simulate", "--workload", str(trace), "--policy", "fifo", "--cluster", str(cluster)])
        == 2
    )
    err = capsys.readouterr().err
    assert "row 2" in err and "worker.cpu" in err


def test_argparse_errors_return_2(capsys):
    assert main(["simulate", "--workload", "demo"]) == 2
    assert (
        main(["simulate", "--workload", "demo", "--policy", "fifo", "--truth-compute-scale", "0"])
        == 2
    )
    assert main([]) == 2
    capsys.readouterr()


def test_demo_prints_a_table(capsys):
    assert main(["demo", "--simulated"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("policy"))
    for column in ("admitted", "completed", "total utility", "avg JCT", "p99 JCT", "wall"):
        assert column in header
    n_jobs = int(lines[0].split(":", 1)[1].split()[0])  # "demo: 12 ResNet/VGG jobs ..."
    rows = {}
    for line in lines[lines.index(header) + 2 :]:
        name, admitted, completed, utility, avg, p99, _missed, *utils = line.split()[:10]
        rows[name] = (admitted, completed, float(utility), avg, p99, utils)
    assert {"fifo", "drf"} <= set(rows)
    for name, (admitted, completed, utility, avg, p99, utils) in rows.items():
        # The small demo has room for everything: every job admitted and completed.
        assert admitted == completed == f"{n_jobs}/{n_jobs}", name
        assert utility > 0, name
        assert _minutes(avg) <= _minutes(p99), name
        assert all(0 <= int(u.rstrip("%")) <= 100 for u in utils), (name, utils)


def _minutes(text: str) -> float:
    value, unit = float(text[:-1]), text[-1]
    return value * {"s": 1 / 60, "m": 1.0, "h": 60.0}[unit]


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["simulate", "--help"], ["--truth-compute-scale", "(default: 1.0)", "(default: 0)"]),
        (["controller", "--help"], ["(default: 127.0.0.1:50051)", "(default: fifo)"]),
        (["experiment", "--help"], ["(default: default)"]),
    ],
    ids=["simulate", "controller", "experiment"],
)
def test_help_states_the_defaults(argv: list[str], shown: list[str], capsys):
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())  # help wraps lines
    for text in shown:
        assert text in out, text
    assert "(default: None)" not in out and "(default: False)" not in out
    assert "(default: )" not in out


@pytest.mark.parametrize("command", ["submit", "agent", "controller", "status", "simulate"])
def test_help_states_a_default_once_and_never_an_empty_one(command: str, capsys):
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: )" not in out
    assert not re.search(r"default [^()]*\) \(default: ", out), (
        out
    )  # "(...; default 300) (default: 300.0)"


def test_the_log_level_may_follow_the_command() -> None:
    from mlsched.cli import get_args_parser

    parser = get_args_parser()
    assert parser.parse_args(["status", "--log-level", "debug"]).log_level == "debug"
    assert parser.parse_args(["--log-level", "error", "status"]).log_level == "error"
    assert parser.parse_args(["simulate", "--log-level", "info"]).log_level == "info"
    with pytest.raises(SystemExit):
        parser.parse_args(["status", "--log-level", "loud"])


def test_a_simulated_experiment_refuses_the_testbeds_options(capsys):
    assert main(["experiment", "oasis", "--policy", "fifo"]) == 2
    err = capsys.readouterr().err
    assert "'--policy'" in err and "experiment oasis" in err
    assert main(["experiment", "gadget", "--profile-via", "agents"]) == 2


@pytest.mark.parametrize("command", ["policies", "workloads", "experiments"])
def test_listings_as_json(command: str, capsys):
    assert main([command, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(set(r) >= {"name", "description"} for r in rows)
    if command == "policies":
        archs = {r["name"]: r["archs"] for r in rows}
        assert archs["pd_ors"] == ["ps"] and archs["fifo"] == ["allreduce", "ps"]


def test_simulate_json_keeps_stdout_to_the_document(tmp_path: Path, capsys):
    argv = ["simulate", *_SMALL, "--policy", "fifo,drf", "--json", "--out", str(tmp_path)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    runs = json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert [r["policy"] for r in runs] == ["fifo", "drf"]
    assert "comparison.json" in captured.err and "oasis-paper" in captured.err


def test_version_names_the_installed_package(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("mlsched ") and out.split()[1][0].isdigit()


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["simulate", "--workload", "demo", "--workload", "x", "--policy", "fifo"], "--workload"),
        (
            ["simulate", "--workload", "demo", "--policy", "fifo", "--seed", "1", "--seed", "2"],
            "--seed",
        ),
        (["train", "--model", "mlp", "--model", "resnet20"], "--model"),
        (["status", "--controller", "a:1", "--controller", "b:2"], "--controller"),
    ],
    ids=["workload", "env-default", "train", "cluster-command"],
)
def test_a_single_value_option_given_twice_is_refused(argv: list[str], flag: str, capsys):
    """The second value used to win silently."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} given more than once" in err


def test_several_policies_run_on_the_same_jobs_side_by_side(tmp_path: Path, capsys):
    argv = ["simulate", *_SMALL, "--policy", "fifo,drf", "--policy", "oasis"]
    argv += ["--set", "oasis.steady_slack=0", "--out", str(tmp_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    table = [line.split()[0] for line in printed.splitlines()]
    assert {"fifo", "drf", "oasis"} <= set(table)
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["policies"] == ["fifo", "drf", "oasis"]
    assert data["policy_options"] == {"fifo": {}, "drf": {}, "oasis": {"steady_slack": 0}}
    for name in data["policies"]:
        one = json.loads((tmp_path / name / "summary.json").read_text())
        assert one["policy"] == name and one["jobs"] == data["jobs"] == 10
        assert data["summaries"][name]["total_utility"] == one["total_utility"]
    for plot in ("jct_cdf.png", "utilization.png"):
        assert (tmp_path / plot).stat().st_size > 0


@pytest.mark.parametrize(
    ("policies", "option", "needle"),
    [
        ("fifo,fifo", [], "each policy once"),
        ("fifo,,drf", [], "separated by commas"),
        ("fifo,drf", ["-P", "oasis.window=3"], "one of the policies run"),
        ("fifo,oasis", ["-P", "steady_slack=0"], "options fifo accepts"),
    ],
    ids=["repeat", "empty", "scope", "unscoped-to-all"],
)
def test_bad_policy_lists_and_options_are_refused_by_name(
    policies: str, option: list[str], needle: str, capsys
):
    assert main(["simulate", "--workload", "demo", "--policy", policies, *option]) == 2
    assert needle in capsys.readouterr().err


def test_repeatable_options_still_repeat(tmp_path: Path):
    argv = ["simulate", *_SMALL, "--policy", "oasis", "-P", "steady_slack=0", "-P", "window=20"]
    assert main([*argv, "--out", str(tmp_path)]) == 0


def test_env_default_for_seed(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("MLSCHED_SEED", "5")
    assert main(["simulate", *_SMALL, "--policy", "fifo", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["seed"] == 5


def test_progress_is_off_in_ci(monkeypatch):
    from mlsched.cli import entry as cli

    monkeypatch.setenv("CI", "1")
    assert cli._progress_enabled() is False


def test_every_environment_variable_the_code_reads_is_in_the_help(capsys):
    """A variable added to the code without a line in ``mlsched --help`` fails here."""
    from mlsched.cli.parser import ENVIRONMENT

    root = Path(__file__).resolve().parent.parent / "mlsched"
    used = {
        name
        for path in root.rglob("*.py")
        for name in re.findall(r"MLSCHED_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8"))
    }
    listed = {name for name, _ in ENVIRONMENT}
    assert used <= listed, sorted(used - listed)
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in listed)


def test_a_command_parses_alike_with_its_parser_alone() -> None:
    """main() builds only the named command's parser: the list of commands it reads the name
    from is every command the whole parser has, and each command's own parser gives the
    same arguments as the whole one (a command left out of COMMANDS, or options that only
    the whole parser adds, would differ)."""
    from mlsched.cli.commands import COMMANDS, command_of, get_args_parser

    whole = get_args_parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(COMMANDS)
    for argv in (
        ["simulate", "--workload", "demo", "--policy", "fifo", "--seed", "3"],
        ["--log-level", "debug", "status", "--controller", "ctl:50051"],
        ["agent", "--controller", "ctl:50051", "--log-level", "info"],
        ["train", "--model", "resnet20"],
        ["experiment", "oasis", "--scale", "smoke"],
        ["policies", "--json"],
        ["simulate", "--no-such-option"],
    ):
        command = command_of(argv)
        assert command == next(w for w in argv if w in COMMANDS)
        try:
            alone = vars(get_args_parser(command).parse_args(argv))
        except SystemExit:
            with pytest.raises(SystemExit):
                whole.parse_args(argv)
            continue
        assert alone == vars(whole.parse_args(argv))
    assert command_of(["--help", "simulate"]) is None
    assert command_of(["--log-level", "debug"]) is None
    assert command_of(["simulat"]) is None  # argparse's own error, listing every command
