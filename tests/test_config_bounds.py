"""Every number a config, the command line or the log carries is a finite number of its own type
in a sane range (issue 49, items 9, 10, 12 and 13): refused in one line naming the key, exit 2,
nothing written.

The schema walk finds every numeric field of every model reachable from `Config` by introspection,
so a field added tomorrow is covered without a line here."""

from __future__ import annotations

import json
import math
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from agent.cli import main
from state.run import Run
from tools.domain.config import Config, lab_config, load_config
from tools.domain.config_toml import to_toml

RUN = ["run", "--goal", "beat baseline", "--model", "autopilot"]
NOT_KEYS = {"source", "lab"}  # Config's fields a user does not set


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse errors
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --- the walk ------------------------------------------------------------------------------------
Path_ = tuple[str | int, ...]


def numeric_fields(model: type[BaseModel], at: Path_ = ()) -> Iterator[tuple[Path_, type]]:
    """(the key path to a number, int or float) for every numeric field under `model`: a list's
    element is at index 0, a table's value under a key the table takes."""
    for name, field in model.model_fields.items():
        if not at and name in NOT_KEYS:
            continue
        yield from _numbers_in(field.annotation, (*at, name))


def _numbers_in(ann: Any, at: Path_) -> Iterator[tuple[Path_, type]]:
    origin = get_origin(ann)
    if origin is Annotated:
        yield from _numbers_in(get_args(ann)[0], at)
    elif origin in (Union, types.UnionType):
        for arg in get_args(ann):
            yield from _numbers_in(arg, at)
    elif origin is list:
        yield from _numbers_in(get_args(ann)[0], (*at, 0))
    elif origin is dict:
        key_type, value_type = get_args(ann)
        key = get_args(key_type)[0] if get_origin(key_type) is Literal else "x"
        yield from _numbers_in(value_type, (*at, key))
    elif isinstance(ann, type) and issubclass(ann, BaseModel):
        yield from numeric_fields(ann, at)
    elif ann in (int, float):
        yield at, ann


def minimal(model: type[BaseModel]) -> dict[str, Any]:
    """The least table of `model` that its required fields allow (a string "local" - a host's
    name, a stage's - and one item of a required list of tables)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if not field.is_required():
            continue
        ann = field.annotation
        if get_origin(ann) is list and issubclass(get_args(ann)[0], BaseModel):
            out[name] = [minimal(get_args(ann)[0])]
        elif isinstance(ann, type) and issubclass(ann, BaseModel):
            out[name] = minimal(ann)
        else:
            out[name] = "local"
    return out


def raw_with(at: Path_, value: Any) -> dict[str, Any]:
    """A config's tables with `value` at `at`, and what each table on the way requires."""

    def table(model: type[BaseModel], rest: Path_) -> dict[str, Any]:
        out = minimal(model)
        key = str(rest[0])
        out[key] = value if len(rest) == 1 else below(model.model_fields[key].annotation, rest[1:])
        return out

    def below(ann: Any, rest: Path_) -> Any:
        inner = _inner_model(ann)
        if isinstance(rest[0], int):  # a list: its first item
            return [value if len(rest) == 1 else table(inner, rest[1:])]
        if inner is not None:
            return table(inner, rest)
        values = get_args(ann)[1]  # a table of numbers (or of tables of numbers)
        return {rest[0]: value if len(rest) == 1 else below(values, rest[1:])}

    return table(Config, at)


def _inner_model(ann: Any) -> Any:
    """The model a field's annotation holds (itself, in an Optional or in a list), or None."""
    for arg in (ann, *get_args(ann)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


FIELDS = sorted(numeric_fields(Config), key=str)
BAD = {
    "inf": math.inf,
    "nan": math.nan,
    "negative": -1,
    "huge": 10**26,
    "bool": True,
    "string": "30",
}


def test_the_walk_finds_every_kind_of_number() -> None:
    keys = {".".join(str(p) for p in at) for at, _ in FIELDS}
    # a sample of each model's: the walk reaches nested tables, lists and tables of numbers
    for key in (
        "budget.max_minutes",
        "budget.max_steps",
        "hosts.0.keepalive_s",
        "server.ready_timeout_s",
        "bench.deadlines.floor_s",
        "bench.request_rate.0",
        "bench.slo.ttft_ms",
        "bench.concurrency.0",
        "fleet.resources.x",
        "fleet.trial_timeout_min",
        "compaction.keep_turns",
        "model.prices.x.x",
        "cost.usd_per_gpu_hour",
        "pipeline.time_scale",
        "objective.precision",
    ):
        assert key in keys, key
    assert len(FIELDS) >= 45, keys


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize(("at", "kind"), FIELDS, ids=[".".join(map(str, a)) for a, _ in FIELDS])
def test_every_number_of_the_config_refuses_what_is_no_number_of_its_kind(
    at: Path_, kind: type, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = BAD[bad]
    if bad == "negative" and kind is float:
        value = -1.5
    if bad == "huge" and kind is float:
        value = 1e300
    config = tmp_path / "agent.toml"
    config.write_text(to_toml(raw_with(at, value)))
    runs = tmp_path / "runs"
    code, err = cli([*RUN, "--config", str(config), "--runs-dir", str(runs)], capsys)
    key = ".".join(str(p) for p in at)
    assert code == 2, (config.read_text(), err)
    assert one_line(err) and f"agent.toml: {key}: " in err, (config.read_text(), err)
    assert not runs.exists()


def test_a_valid_number_of_each_field_loads(tmp_path: Path) -> None:
    """The walk's tables are good ones: a number of the kind's own is accepted at each field
    (so what the test above refuses is the value, not the table around it)."""
    good = {int: 3, float: 3.0}
    fine = {"objective.precision": 0.5, "fleet.object_store_mb": 100, "model.thinking_budget": 2048}
    for at, kind in FIELDS:
        key = ".".join(str(p) for p in at)
        config = tmp_path / "agent.toml"
        config.write_text(to_toml(raw_with(at, fine.get(key, good[kind]))))
        load_config(config)


# --- item 9: the command line and `agent budget` -------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--max-steps", str(10**26)], "argument --max-steps: must be at most 1000000000"),
        (["--max-minutes", "1e9"], "argument --max-minutes: must be at most 43200"),
        (["--max-cost", "1e400"], "argument --max-cost: must be a number > 0, got 1e400"),
        (["--max-cost", "1e7"], "argument --max-cost: must be at most 1000000"),
        (["--max-steps", "3.5"], "argument --max-steps: not a number: '3.5'"),
    ],
)
def test_absurd_budgets_on_the_command_line_are_refused(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli([*RUN, *args, "--runs-dir", str(tmp_path / "runs")], capsys)
    assert code == 2 and one_line(err) and says in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--minutes", "1e9"], "argument --minutes: must be at most 43200"),
        (["--steps", str(10**26)], "argument --steps: must be at most 1000000000"),
        (["--usd", "1e400"], "must be a number > 0, got 1e400"),
    ],
)
def test_agent_budget_refuses_absurd_limits(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.create(tmp_path / "runs", "r")
    run.close()
    code, err = cli(["budget", str(run.path), *args], capsys)
    assert code == 2 and one_line(err) and says in err, err
    assert not list((run.path / "inbox").glob("*.json"))


# --- item 10: config files that crashed ----------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 5000 + "]" * 5000,
        "x = " + "{a = " * 5000 + "1" + "}" * 5000,
        "[search]\nx = " + "[" * 40 + "1" + "]" * 40,  # parses; past 32 levels all the same
    ],
    ids=["arrays-5000", "inline-tables-5000", "arrays-40"],
)
def test_a_config_nested_too_deep_is_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(text + "\n")
    code, err = cli([*RUN, "--config", str(config), "--runs-dir", str(tmp_path / "runs")], capsys)
    assert code == 2 and one_line(err) and "nested" in err, err
    assert not (tmp_path / "runs").exists()


def test_a_config_that_never_ends_is_not_read_to_its_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli([*RUN, "--config", "/dev/zero", "--runs-dir", str(tmp_path / "runs")], capsys)
    assert code == 2 and one_line(err) and "/dev/zero is larger than 1 MiB" in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[server]\ncommand = "python -m sim\\u0000 --tp 8"', "server.command"),
        ('[[hosts]]\nname = "local"\nworkdir = "/tmp/a\\u0000b"', "hosts.0.workdir"),
        ('[search]\n"--tp" = [1, "2\\u0000"]', "search.--tp.1"),
    ],
)
def test_a_nul_in_a_config_string_is_refused_before_a_run_folder(
    toml: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(toml + "\n")
    code, err = cli([*RUN, "--config", str(config), "--runs-dir", str(tmp_path / "runs")], capsys)
    assert code == 2 and one_line(err) and f"{key}: a NUL character" in err, err
    assert not (tmp_path / "runs").exists()


# --- item 12: the budget a log carries -----------------------------------------------------------
@pytest.mark.parametrize(
    ("limits", "says"),
    [
        ({"max_minutes": "inf"}, "limits.max_minutes: Input should be a valid number (got 'inf')"),
        ({"max_steps": -3}, "limits.max_steps: Input should be greater than or equal to 1"),
        ({"max_usd": 1e300}, "limits.max_usd: Input should be less than or equal to 1000000"),
        ({"max_steps": None}, "limits.max_steps: Input should be a valid integer (got None)"),
        ({"max_turns": 5}, "unknown limit 'max_turns'"),
    ],
)
@pytest.mark.parametrize("command", ["resume", "todos", "report", "watch"])
def test_a_limit_written_into_the_log_by_hand_is_refused_when_folded(
    limits: dict[str, Any],
    says: str,
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = Run.create(tmp_path / "runs", "r")
    limits_ok = {"max_steps": 300, "max_usd": 25.0, "max_minutes": 1440.0}
    run.append("run_started", goal="beat baseline", brain="autopilot", limits=limits_ok)
    run.close()
    line = {"seq": 2, "ts": "2026-01-01T00:00:00Z", "type": "limits_changed", "limits": limits}
    with run.events_path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    before = run.events_path.read_bytes()
    once = ["--once"] if command == "watch" else []
    code, err = cli([command, str(run.path), *once], capsys)
    assert code == 2 and one_line(err), err
    assert "events.jsonl: event seq 2 (limits_changed): " in err and says in err, err
    assert "damaged" not in err, err  # an edited budget, not a damaged line
    assert run.events_path.read_bytes() == before


def test_run_started_limits_are_checked_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.create(tmp_path / "runs", "r")
    run.close()
    line = {"seq": 1, "ts": "t", "type": "run_started", "goal": "g", "brain": "autopilot"}
    line["limits"] = {"max_steps": 300, "max_usd": 25.0, "max_minutes": math.inf}
    run.events_path.write_text(json.dumps(line) + "\n")  # json writes Infinity
    code, err = cli(["todos", str(run.path)], capsys)
    assert code == 2 and one_line(err) and "limits.max_minutes: Input should be a finite" in err


# --- item 13: a section added to the built-in lab changes only what it says ----------------------
def test_cost_added_to_the_lab_keeps_the_labs_workload(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[cost]\nusd_per_gpu_hour = 2.5\n")
    got, lab = load_config(config), lab_config()
    assert got.bench.max_tokens == 128 and got.server.ready_timeout_s == 120
    assert got.cost is not None and got.cost.usd_per_gpu_hour == 2.5
    assert got.lab  # `agent run --fleet ray` starts the lab's simulated boxes, as without a file
    mine = got.model_dump(exclude={"cost", "source", "server"})
    assert mine == lab.model_dump(exclude={"cost", "source", "server"})
    assert got.server.model_dump(exclude={"port"}) == lab.server.model_dump(exclude={"port"})


def test_a_bench_section_on_the_lab_changes_only_its_keys(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("[bench]\nconcurrency = [1, 2]\n[server]\nkill_timeout_s = 5\n")
    got = load_config(config)
    assert got.bench.concurrency == [1, 2] and got.bench.max_tokens == 128
    assert got.server.kill_timeout_s == 5 and got.server.ready_timeout_s == 120


def test_a_real_box_keeps_the_real_defaults(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[server]\nengine = "vllm"\ncommand = "vllm serve m"\n')
    got = load_config(config)
    assert got.bench.max_tokens == 512 and got.server.ready_timeout_s == 1800 and not got.lab
    own_sim = tmp_path / "sim.toml"  # a simulator command of the file's own: a box it describes
    own_sim.write_text('[server]\ncommand = "python -m sim"\n')
    assert load_config(own_sim).bench.max_tokens == 512


@pytest.mark.parametrize(
    ("goal", "says"),
    [
        ("highest throughput with p99 TTFT under 0 ms", "the goal's ttft limit 0 ms"),
        ("TPOT below 99999999999 s", "the goal's tpot limit 1e+14 ms"),
    ],
)
def test_a_goals_latency_limit_is_held_to_the_slos_bounds(
    goal: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--goal", goal, "--model", "autopilot", "--runs-dir", str(tmp_path / "runs")]
    code, err = cli(args, capsys)
    assert code == 2 and one_line(err) and says in err, err
    assert not (tmp_path / "runs").exists()
