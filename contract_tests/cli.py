"""`smlocal check IMAGE`: run the hosting-contract checks against a local image and report.

Exit status: 0 when no check failed or errored (skipped checks are fine), 1 when one did, 2 on a usage
error (unknown check id, image not found locally, unreadable --payload, bad --env or --model-data),
3 when no Docker engine answers. emulator/cli.py adds the `check` subcommand with add_arguments() and
run(); `python3 -m contract_tests.cli IMAGE ...` is the same command on its own.

This module imports only argparse at import time: `smlocal --help` must not load Docker or the checks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from contract_tests.registry import Check
    from contract_tests.result import CheckResult
    from contract_tests.target import CheckConfig, Target


class UsageError(Exception):
    """The command line cannot be run as given (exit 2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `check` subcommand's arguments (limits default to SageMaker's, see emulator.config)."""
    parser.description = parser.description or (
        "Run the SageMaker hosting-contract checks against a local image (docs/contract.md)."
    )
    parser.epilog = (
        "exit status: 0 no check failed or errored (skipped is fine), 1 a check failed or errored, "
        "2 usage error (unknown check id, image not found locally), 3 no Docker engine"
    )
    parser.add_argument("image", help="a local image (tag, id, or an ECR URI whose repository:tag is local)")
    parser.add_argument("--model-data", metavar="URL", help="s3://, file:// or a local path to model.tar.gz")
    limits = parser.add_argument_group("limits (SageMaker's by default)")
    limits.add_argument(
        "--startup-timeout",
        type=float,
        default=480.0,
        metavar="S",
        help="seconds until the first 200 from /ping (default 480)",
    )
    limits.add_argument("--ping-timeout", type=float, metavar="S", help="seconds per /ping (default 2)")
    limits.add_argument(
        "--accept-timeout", type=float, metavar="S", help="seconds to accept a connection (default 0.25)"
    )
    limits.add_argument(
        "--invocation-timeout", type=float, metavar="S", help="seconds to answer /invocations (default 60)"
    )
    limits.add_argument(
        "--stop-grace", type=float, metavar="S", help="seconds between SIGTERM and SIGKILL (default 30)"
    )
    parser.add_argument(
        "--payload", metavar="FILE", help="request body the invocation checks send (default {})"
    )
    parser.add_argument(
        "--content-type",
        default="application/json",
        metavar="T",
        help="its content type (default application/json)",
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="container environment (repeatable)"
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="ID",
        dest="checks",
        help="a check id or group to run (repeatable, or comma-separated; default all)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--junit", metavar="FILE", help="write the results as JUnit XML")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="smlocal check", description="Check an inference image against SageMaker's hosting contract."
    )
    add_arguments(parser)
    return parser


def _environment(items: Sequence[str]) -> dict[str, str]:
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def _writable(path: str | None, option: str) -> None:
    if path is not None and not Path(path).resolve().parent.is_dir():
        raise UsageError(f"{option} {path}: folder {Path(path).resolve().parent} does not exist")


def check_config(args: argparse.Namespace) -> CheckConfig:
    """The CheckConfig the arguments describe; UsageError when they can't."""
    from contract_tests.target import CheckConfig
    from emulator.config import ContractLimits

    changes = {
        "startup_timeout_s": args.startup_timeout,
        "ping_timeout_s": args.ping_timeout,
        "accept_timeout_s": args.accept_timeout,
        "invocation_timeout_s": args.invocation_timeout,
        "stop_grace_s": args.stop_grace,
    }
    for name, value in changes.items():
        if value is not None and value <= 0:
            option = "--" + name.removesuffix("_s").replace("_", "-")
            raise UsageError(f"{option} must be a positive number of seconds, got {value:g}")
    limits = ContractLimits().replace(**{k: v for k, v in changes.items() if v is not None})
    payload = b"{}"
    if args.payload:
        try:
            payload = Path(args.payload).read_bytes()
        except OSError as exc:
            raise UsageError(f"--payload {args.payload}: {exc.strerror or exc}") from exc
    _writable(args.json, "--json")
    _writable(args.junit, "--junit")
    return CheckConfig(
        image=args.image,
        model_data=args.model_data,
        environment=_environment(args.env),
        payload=payload,
        content_type=args.content_type,
        limits=limits,
    )


def selected(ids: Sequence[str]) -> list[Check]:
    """The checks named by ids or groups (comma-separated lists allowed); UsageError on an unknown one."""
    from contract_tests.registry import select

    wanted = [part.strip() for item in ids for part in item.split(",") if part.strip()]
    try:
        return select(wanted or None)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run `smlocal check` as parsed into `args`; returns the exit status."""
    from rich.console import Console
    from rich.markup import escape

    from contract_tests import report
    from contract_tests.target import Target
    from emulator.errors import EngineError, ImageNotFound, SmlocalError

    # httpx logs every request at INFO (smlocal's default level): the checks send hundreds.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if console is None:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console.width = 120  # CI logs: room for the messages (rich assumes 80)
    err = Console(stderr=True, soft_wrap=True)
    try:
        config = check_config(args)
        checks = selected(args.checks)
    except UsageError as exc:
        err.print(f"smlocal check: {exc}", markup=False, highlight=False)
        return report.EXIT_USAGE

    _sigterm_cleans_up(err)
    target = Target(config)
    try:
        try:
            image = target.image  # resolves tags, ids and ECR URIs to a local image
        except ImageNotFound:
            err.print(
                f"smlocal check: image {args.image} not found locally. Build it (docker build -t "
                f"{args.image} .) or pull it first; smlocal check never pulls.",
                markup=False,
                highlight=False,
            )
            return report.EXIT_USAGE
        try:
            model_dir = target.model_dir
        except SmlocalError as exc:
            err.print(f"smlocal check: --model-data {args.model_data}: {exc.message}", markup=False)
            return report.EXIT_USAGE
    except EngineError as exc:  # no engine answers, or it fails: nothing can be checked
        err.print(f"smlocal check: {exc.message}", markup=False, highlight=False)
        return report.EXIT_NO_ENGINE
    except BaseException:
        target.close()
        raise

    limits = config.limits
    console.print(
        f"Checking [bold]{escape(args.image)}[/] ({image.id.removeprefix('sha256:')[:12]}) against "
        f"the SageMaker hosting contract: {len(checks)} check(s); "
        f"startup deadline {limits.startup_timeout_s:g} s, ping {limits.ping_timeout_s:g} s, "
        f"invocations {limits.invocation_timeout_s:g} s, stop grace {limits.stop_grace_s:g} s; "
        f"model dir {model_dir}",
        highlight=False,
    )
    try:
        results = _run_with_progress(checks, target, console)
    except KeyboardInterrupt:  # run_checks removed the containers on the way out
        err.print("smlocal check: interrupted")
        return 130

    report.print_report(results, console, checks)
    properties = {"image": args.image, "image_id": image.id}
    if args.json:
        report.write_json(results, args.json)
        console.print(f"JSON report: {args.json}", highlight=False)
    if args.junit:
        report.write_junit(results, args.junit, checks, properties=properties)
        console.print(f"JUnit report: {args.junit}", highlight=False)
    return report.exit_code(results)


def _sigterm_cleans_up(err: Console) -> None:
    """SIGTERM (a CI timeout, `kill`) ends the run as Ctrl-C does: SystemExit(143) unwinds through
    run_checks, whose `finally` removes this run's containers at once. From the main thread only."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def on_sigterm(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        err.print("smlocal check: SIGTERM: removing this run's containers", markup=False)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _run_with_progress(checks: Sequence[Check], target: Target, console: Console) -> list[CheckResult]:
    """run_checks with a live line for the running check (a spinner on a terminal) and one printed
    line per finished check (what CI logs keep)."""
    from rich.markup import escape
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from contract_tests import report
    from contract_tests.runner import run_checks

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:

        def describe(index: int) -> str:
            if index >= len(checks):
                return "done"
            return f"running [bold]{escape(checks[index].id)}[/] ({escape(checks[index].title)})"

        task = progress.add_task(describe(0), total=len(checks))
        done = 0

        def on_result(result: CheckResult) -> None:
            nonlocal done
            done += 1
            progress.console.print(report.progress_line(result))
            progress.update(task, advance=1, description=describe(done))

        return run_checks(checks, target, on_result=on_result)


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
