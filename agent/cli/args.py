"""Argument parsing shared by the subcommands: bad usage is one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter, ValidationError

DEFAULT_RUNS_DIR = "runs"


class Parser(argparse.ArgumentParser):
    """Bad usage is one line, "agent CMD: what is wrong", exit 2. An option this command does not
    know is named first: argparse checks the required options before it looks at the unknown
    ones, so `agent run --gaol X` would say "--goal is required", not that --gaol is wrong."""

    seen: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        unknown = self.unknown_options()
        if unknown and "required" in message:
            s = "s" if len(unknown) > 1 else ""
            message = f"unrecognized option{s}: {' '.join(unknown)} (see --help)"
        name = self.prog.split()[-1]
        print(f"agent: {message}" if name == "agent" else f"agent {name}: {message}",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)

    def unknown_options(self) -> list[str]:
        """The words given that look like options and are none of this command's (nor an
        abbreviation argparse would take), up to `--`."""
        out = []
        for word in self.seen or []:
            if word == "--":
                break
            if not word.startswith("-") or word == "-" or self._negative_number(word):
                continue
            option = word.split("=", 1)[0]
            if option in self._option_string_actions:
                continue
            if (
                option.startswith("--")
                and self.allow_abbrev
                and any(known.startswith(option) for known in self._option_string_actions)
            ):
                continue
            out.append(option)
        return out

    def _negative_number(self, word: str) -> bool:
        try:
            float(word)
        except ValueError:
            return False
        return True


def runs_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=Path(os.environ.get("AGENT_RUNS_DIR", DEFAULT_RUNS_DIR)),
        help="the folder holding run folders (default: ./runs or $AGENT_RUNS_DIR)",
    )


def positive(kind: type[int] | type[float], hint: str = "") -> Callable[[str], float]:
    """An argparse type for a number > 0 that has no kind of its own in state/numbers.py."""
    return within(Annotated[kind, Field(gt=0, allow_inf_nan=False)], hint)


def within(number: Any, hint: str = "") -> Callable[[str], Any]:
    """An argparse type for a number of one of state/numbers.py's kinds (a budget: Steps, Dollars,
    Minutes), with the bounds agent.toml's [budget] has: a negative, zero, infinite or absurd one
    is refused in one line (the hint is said where the value would switch a limit off)."""
    adapter: TypeAdapter[Any] = TypeAdapter(number)
    parse_as = get_args(number)[0] if get_args(number) else number

    def parse(text: str) -> Any:
        try:
            value = parse_as(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        try:
            return adapter.validate_python(value)
        except ValidationError as err:
            if not (math.isfinite(value) and value > 0):
                raise argparse.ArgumentTypeError(
                    f"must be a number > 0, got {text}{hint}"
                ) from None
            msg = err.errors()[0]["msg"].replace("Input should be ", "")
            msg = msg.replace("greater than or equal to", "at least")
            msg = msg.replace("less than or equal to", "at most")
            raise argparse.ArgumentTypeError(f"must be {msg}, got {text}") from None

    return parse


def fleet_args(p: argparse.ArgumentParser) -> None:
    """`agent run --fleet ray [--boxes N]`: trials in parallel on a Ray cluster (docs/fleet.md)."""
    p.add_argument(
        "--fleet",
        choices=["ray"],
        help="run trials in parallel on a Ray cluster: [fleet] of the config, RAY_ADDRESS, or "
        "with --boxes a local cluster of simulated boxes (docs/fleet.md)",
    )
    p.add_argument(
        "--boxes",
        type=positive(int),
        help="with --fleet: start a local Ray cluster of N boxes (the lab) instead of joining one",
    )
