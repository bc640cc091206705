"""`smlocal check IMAGE`: run the hosting-contract checks against a local image and report.

Exit status: 0 when no check failed or errored (skipped checks are fine), 1 when one did, 2 on a usage
error (unknown check id, image not found locally, unreadable --payload, bad --env, a --model-data that
is no model data URL at all), 3 when no Docker engine answers. Model data that cannot be fetched or
extracted is no usage error: the model-data.extracts check FAILS with SageMaker's text.
emulator/cli.py adds the `check` subcommand with add_arguments(), emulator/commands/standalone.py calls
run(); `python3 -m contract_tests.cli IMAGE ...` is the same command on its own.

This module imports only argparse at import time: `smlocal --help` must not load Docker or the checks.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from contract_tests.payload_options import (
    PAYLOAD_OPTIONS,
    PayloadOption,
    UsageError,
    payload_fields,
    stream_payload,
)

if TYPE_CHECKING:
    from rich.console import Console

    from contract_tests.check_config import CheckConfig
    from contract_tests.registry import Check


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
    parser.add_argument(
        "--model-data",
        metavar="URL",
        help="s3://, file:// or a local path to model.tar.gz (or a model folder), mounted at /opt/ml/model; "
        "for an image with the label com.amazonaws.sagemaker.capabilities.multi-models=true also the "
        "multi-model data unless --multi-model-data is given: one model.tar.gz serves both, and of an S3 "
        "prefix or a local folder of *.tar.gz the single-model checks get the first artifact",
    )
    parser.add_argument(
        "--multi-model-data",
        metavar="URL",
        help="the multi-model prefix (s3://bucket/models/ or a local folder of *.tar.gz) for the mme.* "
        "checks of an image with the multi-models label; --model-data is then the single-model data only",
    )
    parser.add_argument(
        "--profile",
        choices=("realtime", "serverless"),
        default="realtime",
        help="how the image will be deployed: serverless runs the serverless.* checks (writes outside /tmp, "
        "a GPU needed, 4 MB payloads, 3-minute startup) and makes image.size fail over the image size limit "
        "(SageMaker serverless refuses such images); realtime (default) skips those and only warns",
    )
    parser.add_argument(
        "--image-size-limit",
        metavar="SIZE",
        help="image.size's limit, e.g. 10GB, 500MB (K/M/G = powers of 1024; default 10GB, SageMaker "
        "serverless' limit)",
    )
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
    parser.set_defaults(**{PAYLOAD_OPTIONS: []})
    parser.add_argument(
        "--payload",
        action=PayloadOption,
        metavar="FILE",
        help="a request body the model accepts (repeatable: invocations.serves sends each, the other "
        "invocation checks the first; default {}, and no 2xx to it is only a warning)",
    )
    parser.add_argument(
        "--content-type",
        action=PayloadOption,
        metavar="T",
        help="the content type of the --payload before it (default application/json)",
    )
    parser.add_argument(
        "--accept", action=PayloadOption, metavar="T", help="an Accept header for the --payload before it"
    )
    streaming = parser.add_argument_group("response streaming (the streaming.* checks)")
    streaming.add_argument(
        "--streaming",
        action="store_true",
        help="the image streams its answers (InvokeEndpointWithResponseStream): run the streaming.* "
        "checks (skipped without it)",
    )
    streaming.add_argument(
        "--stream-body",
        metavar="JSON",
        help="the request the model streams an answer to: JSON text, or @FILE (default a text-generation "
        'request: {"inputs": "Tell me a story.", "parameters": {"max_new_tokens": 64}, "stream": true})',
    )
    streaming.add_argument(
        "--stream-content-type",
        metavar="T",
        help="the --stream-body's content type (default application/json)",
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
    from contract_tests import preflight  # argparse only at import time

    preflight.add_arguments(parser)
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


def _model_data_url(url: str | None, multi_model: bool = True) -> str | None:
    """`url` when it can be a model data URL (s3://bucket/key, file://, a path; with `multi_model`, also
    an s3:// prefix ending in '/', as for an image with the multi-models label); UsageError when it
    cannot be one at all. Whether anything is there, and whether it extracts, model-data.extracts says."""
    if url is None:
        return None
    from contract_tests.multi_model import locate_model_data
    from emulator.errors import ValidationFailed
    from emulator.model.resources import ModelDataSource
    from emulator.model_data.sources import locate

    try:
        locate_model_data(url) if multi_model else locate(ModelDataSource(uri=url))
    except ValidationFailed as exc:
        raise UsageError(f"--model-data {url}: {exc.message}") from exc
    return url


def _size_limit(text: str | None) -> int:
    from contract_tests.check_config import SERVERLESS_IMAGE_LIMIT_BYTES, parse_size

    if text is None:
        return SERVERLESS_IMAGE_LIMIT_BYTES
    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"--image-size-limit: {exc}") from exc


def check_config(args: argparse.Namespace) -> CheckConfig:
    """The CheckConfig the arguments describe; UsageError when they can't."""
    from contract_tests import preflight
    from contract_tests.check_config import CheckConfig
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
    payloads = payload_fields(getattr(args, PAYLOAD_OPTIONS, None) or [])
    _writable(args.json, "--json")
    _writable(args.junit, "--junit")
    return CheckConfig(
        image=args.image,
        model_data=_model_data_url(args.model_data),
        multi_model_data=_model_data_url(args.multi_model_data),
        profile=args.profile,
        image_size_limit_bytes=_size_limit(args.image_size_limit),
        environment=_environment(args.env),
        limits=limits,
        stream=stream_payload(args.streaming, args.stream_body, args.stream_content_type),
        **payloads,
        **preflight.fields(
            args.instance_type, args.deploy_as, args.region, args.repository_access_mode, os.environ
        ),
    )


def selected(ids: Sequence[str]) -> list[Check]:
    """The checks named by ids or groups (comma-separated lists allowed); UsageError on an unknown one."""
    from contract_tests.registry import select

    try:
        return select(_parts(ids) or None)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from exc


def _parts(ids: Sequence[str]) -> list[str]:
    return [part.strip() for item in ids for part in item.split(",") if part.strip()]


def named(ids: Sequence[str], checks: Sequence[Check]) -> frozenset[str]:
    """The ids of `checks` named exactly in `ids` (a group name does not count): CheckConfig.named_checks,
    the checks that run in full even on a slow model."""
    wanted = set(_parts(ids))
    return frozenset(c.id for c in checks if c.id in wanted)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run `smlocal check` as parsed into `args`; returns the exit status. While it runs, Ctrl-C ends it
    with 130 and SIGTERM with 143, its containers removed; the process's own SIGTERM handling is
    restored after. A SIGINT or SIGTERM that a launcher held back since the process started
    (emulator.interrupts) is released once both are handled: it ends the run the same way."""
    from rich.console import Console

    from emulator.interrupts import EXIT_INTERRUPTED, interrupt_handled, release_signals

    err = Console(stderr=True, soft_wrap=True)
    try:
        with _sigterm_cleans_up(err):
            release_signals()
            return _run(args, console)
    except KeyboardInterrupt:  # run_checks, or the Target, removed the containers on the way out
        interrupt_handled()
        err.print("smlocal check: interrupted")
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace, console: Console | None = None) -> int:
    import dataclasses

    from rich.console import Console
    from rich.markup import escape

    from contract_tests import cold_start, preflight, report
    from contract_tests import console as console_report
    from contract_tests.target import Target
    from emulator.errors import EngineError, ImageNotFound

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
        config = dataclasses.replace(config, named_checks=named(args.checks, checks))
    except UsageError as exc:
        err.print(f"smlocal check: {exc}", markup=False, highlight=False)
        return report.EXIT_USAGE

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
        if config.model_data is not None and (not target.multi_model or config.multi_model_data):
            try:  # a prefix is model data for a multi-model image only (unless the prefix is given apart)
                _model_data_url(config.model_data, multi_model=False)
            except UsageError as exc:
                target.close()
                err.print(f"smlocal check: {exc}", markup=False, highlight=False)
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
        f"model data {escape(config.model_data) if config.model_data else 'none (empty /opt/ml/model)'}"
        f"{f'; multi-model data {escape(config.multi_model_data)}' if config.multi_model_data else ''}"
        f"{'; profile serverless' if config.profile == 'serverless' else ''}"
        f"{f'; streaming with {escape(config.stream.source)}' if config.stream else ''}"
        f"{f'; instance {escape(config.instance_type)}' if config.instance_type else ''}",
        highlight=False,
    )
    results = console_report.run_with_progress(
        checks, target, console
    )  # Ctrl-C: KeyboardInterrupt, answered by run()

    console_report.print_report(results, console, checks, cold_start.profile_texts(target))
    properties = {"image": args.image, "image_id": image.id}
    if preflight.wanted(config):
        judged = cold_start.judgement(target)
        properties["verdict"] = preflight.verdict(results, config, [judged] if judged else [])
        console.print(properties["verdict"], style="bold", highlight=False, markup=False)
    if args.json:
        extra = {"cold_start": cold_start.profile_json(target)}
        report.write_json(results, args.json, checks, properties=properties, extra=extra)
        console.print(f"JSON report: {args.json}", highlight=False)
    if args.junit:
        report.write_junit(results, args.junit, checks, properties=properties)
        console.print(f"JUnit report: {args.junit}", highlight=False)
    return report.exit_code(results)


@contextlib.contextmanager
def _sigterm_cleans_up(err: Console) -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) ends the run as Ctrl-C does: SystemExit(143) unwinds through
    run_checks, whose `finally` removes this run's containers at once. From the main thread only; the
    handler there before (pytest's, a caller's) is put back afterwards."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        err.print("smlocal check: SIGTERM: removing this run's containers", markup=False)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
