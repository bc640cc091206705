"""The `smlocal` command: its parser and its entry point, main(); emulator.commands does the work.

smlocal setup                      start a Docker engine (installing Debian's when needed), base image
smlocal serve                      serve SageMaker's control plane and runtime on one port
smlocal deploy IMAGE --model-data URL [--name N] [--instance-count K] [--env K=V ...]
smlocal deploy --container NAME=IMAGE[,model=URL] ... [--mode serial|direct] [--name N]
smlocal deploy IMAGE --multi-model PREFIX [--name N]
smlocal invoke ENDPOINT [--body TEXT | --body-file F] [--content-type T] [--container NAME] [--stream] [-o F]
smlocal ls | logs ENDPOINT [--variant V] [--instance I] [--follow] | metrics ENDPOINT [--json]
smlocal profile ENDPOINT [--all] [--json]   the cold start of the last instance start, phase by phase
smlocal delete ENDPOINT | down [--state-dir D | --all]
smlocal check IMAGE [--check ID ...] [--json F] [--junit F]   the hosting-contract checks (contract_tests)
smlocal demo [--out PNG] [--prompt TEXT] [--gpu [--torch cuda]] [--port P] [--keep]   the SD sample end to end

The CLI (this module and emulator.commands) is the only code that reads os.environ; it builds the
frozen config.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from contract_tests.cli import add_arguments as check_arguments
from emulator import __version__
from emulator.commands import quota as instance_quota
from emulator.commands.client import ENDPOINT_URL_ENV
from emulator.commands.endpoints import cmd_delete, cmd_deploy, cmd_invoke, cmd_logs, cmd_ls, cmd_metrics
from emulator.commands.profile import cmd_profile
from emulator.commands.server import (
    DEFAULT_STATE_DIR,
    cmd_down,
    cmd_serve,
    cmd_setup,
    registry_arguments,
)
from emulator.commands.standalone import cmd_check, cmd_demo
from emulator.config import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_REGION, ArchiveLimits, ContractLimits
from emulator.errors import SmlocalError
from emulator.interrupts import release_signals

#: The demo's PNG: inside .smlocal/ (git-ignored) with the demo's state and build folders.
DEMO_OUT = ".smlocal/sd-demo.png"
#: Loggers that print a line per HTTP request at INFO: the CLI's output is its own lines only.
QUIET_LOGGERS = ("httpx", "httpcore")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def _archive_arguments(p: argparse.ArgumentParser) -> None:
    """`smlocal serve` options bounding model data archives and local model directories."""
    d = ArchiveLimits()
    p.add_argument(
        "--archive-max-header-bytes",
        type=_positive_int,
        default=d.max_header_bytes,
        metavar="N",
        help="refuse an archive with a PAX extended header or GNU long-name record over N bytes",
    )
    p.add_argument(
        "--archive-max-entries",
        type=_positive_int,
        default=d.max_entries,
        metavar="N",
        help="refuse an archive of more than N members",
    )
    p.add_argument(
        "--archive-max-bytes",
        type=_positive_int,
        default=d.max_extracted_bytes,
        metavar="N",
        help="refuse model data whose files add up to more than N bytes",
    )
    p.add_argument(
        "--archive-max-ratio",
        type=_positive_float,
        default=d.max_ratio,
        metavar="R",
        help="refuse an archive that decompresses to more than R times its compressed size, checked "
        f"past the first {d.ratio_grace_bytes >> 20} MiB",
    )
    p.add_argument(
        "--archive-max-trailing-bytes",
        type=_positive_int,
        default=d.max_trailing_bytes,
        metavar="N",
        help="refuse an archive with more than N bytes after its end-of-archive marker",
    )
    p.add_argument(
        "--allow-local-model-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a local directory (and everything under it) that may be given as model data and mounted "
        "as it is; repeatable; replaces the default: the working directory and the system temp directory",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value


def _container(text: str) -> tuple[str, str, str | None]:
    """`NAME=IMAGE[,model=URL]` -> (name, image, model data or None)."""
    name, sep, rest = text.partition("=")
    image, _, option = rest.partition(",")
    model: str | None = None
    if option:
        key, has_value, model = option.partition("=")
        if key != "model" or not has_value or not model:
            raise argparse.ArgumentTypeError(f"expected NAME=IMAGE[,model=URL], got {text!r}")
    if not sep or not name or not image:
        raise argparse.ArgumentTypeError(f"expected NAME=IMAGE[,model=URL], got {text!r}")
    return name, image, model


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default after its help, unless there is none or the help says it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="smlocal", description="Amazon SageMaker hosting, locally.")
    parser.add_argument("--version", action="version", version=f"smlocal {__version__}")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    def client_cmd(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, formatter_class=_DefaultsFormatter)
        p.add_argument(
            "--endpoint-url", help=f"smlocal's URL (default ${ENDPOINT_URL_ENV} or http://127.0.0.1:8090)"
        )
        return p

    p = sub.add_parser("setup", help="start a Docker engine and prepare the base image")
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("serve", help="serve the SageMaker APIs", formatter_class=_DefaultsFormatter)
    p.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (other than loopback: warned)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port of every API (boto3's endpoint_url)")
    p.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        help="where definitions, model data and server.json live; owner of this server's containers",
    )
    p.add_argument("--region", default=DEFAULT_REGION, help="the region in ARNs")
    p.add_argument("--account-id", default="123456789012", help="the account id in ARNs and messages")
    limits = ContractLimits()
    p.add_argument(
        "--stop-grace",
        type=float,
        help=f"seconds between SIGTERM and SIGKILL (default: {limits.stop_grace_s:g})",
    )
    p.add_argument(
        "--invocation-timeout",
        type=float,
        help=f"seconds to wait for /invocations (default: {limits.invocation_timeout_s:g})",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        help=f"seconds until the first 200 from /ping (default: {limits.startup_timeout_s:g})",
    )
    for option, what, default in (
        (
            "--stream-first-byte-timeout",
            "for a response stream's first byte",
            limits.stream_first_byte_timeout_s,
        ),
        (
            "--stream-idle-timeout",
            "a response stream may be silent between parts",
            limits.stream_idle_timeout_s,
        ),
        ("--stream-timeout", "for a whole response stream, from the request", limits.stream_timeout_s),
    ):
        p.add_argument(
            option, type=_positive_float, metavar="S", help=f"seconds {what} (default: {default:g})"
        )
    p.add_argument("--keep-containers", action="store_true", help="leave containers running on exit")
    p.add_argument(
        "--time-scale",
        type=_positive_float,
        default=1.0,
        metavar="N",
        help="run metric periods, scaling alarms and cooldowns N times faster (contract timeouts unchanged)",
    )
    p.add_argument(
        "--model-load-window",
        type=_positive_float,
        default=60.0,
        metavar="S",
        help="multi-model endpoints: seconds an invocation waits for its model to load before it answers "
        "429 ModelNotReadyException (loading goes on; default: 60, SageMaker's)",
    )
    p.add_argument(
        "--multi-model-cache-gb",
        type=_positive_float,
        default=20.0,
        metavar="GB",
        help="multi-model endpoints: the host's cache of extracted models; beyond it the least recently "
        "used ones no load is using are deleted (default: 20)",
    )
    p.add_argument(
        "--serverless-idle",
        type=_positive_float,
        default=300.0,
        metavar="S",
        help="serverless endpoints: seconds without a request after which the container is stopped "
        "(the next request is a cold start; scaled by --time-scale; default: 300)",
    )
    instance_quota.add_argument(p)
    p.add_argument(
        "--event-loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="auto: uvloop when installed, else asyncio's",
    )
    p.add_argument(
        "--iam-policies",
        metavar="FILE",
        help="authorize the invoke operations against the identity-based IAM policies in FILE (JSON: access "
        "key ids -> an ARN and policy documents; docs/api-coverage.md); without it every call is allowed",
    )
    p.add_argument(
        "--no-instance-limits",
        action="store_true",
        help="run every endpoint's containers without their instance type's memory limit, CPU share and "
        "GPUs (for a machine smaller than the instance; one model: its tag smlocal:instance-limits=off; "
        "docs/cloud-parity.md#the-instance-a-container-gets)",
    )
    _archive_arguments(p)
    registry_arguments(p)
    p.set_defaults(func=cmd_serve)

    p = client_cmd("deploy", "create a model, an endpoint config and an endpoint; wait for InService")
    p.add_argument("image", nargs="?", help="the model's image (or --container, several times)")
    p.add_argument(
        "--container",
        action="append",
        default=[],
        type=_container,
        metavar="NAME=IMAGE[,model=URL]",
        help="a container of a multi-container model (ContainerHostname NAME), in order; --env goes to all",
    )
    p.add_argument(
        "--mode",
        choices=("serial", "direct"),
        help="with --container: Serial (an inference pipeline, the default) or Direct invocation",
    )
    p.add_argument("--model-data", help="s3://, file:// or a local path to model.tar.gz")
    p.add_argument(
        "--multi-model",
        metavar="PREFIX",
        help="a multi-model endpoint of IMAGE: its models are the *.tar.gz under PREFIX (s3://bucket/prefix/ "
        "or a local folder), loaded on demand (invoke --target-model)",
    )
    p.add_argument("--name", help="model, endpoint config and endpoint name (default: IMAGE-TIMESTAMP)")
    p.add_argument("--instance-count", type=_positive_int, default=1, help="instances (1 or more)")
    p.add_argument("--instance-type", default="ml.m5.large", help="the variant's instance type")
    p.add_argument("--variant-name", default="AllTraffic", help="the production variant's name")
    p.add_argument(
        "--env", action="append", default=[], type=_key_value, metavar="K=V", help="container environment"
    )
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for InService")
    p.add_argument("--no-wait", action="store_true", help="return once CreateEndpoint is accepted")
    p.set_defaults(func=cmd_deploy)

    p = client_cmd("invoke", "call InvokeEndpoint")
    p.add_argument("endpoint")
    p.add_argument("--body", default="")
    p.add_argument("--body-file")
    p.add_argument("--content-type")
    p.add_argument("--accept")
    p.add_argument("--custom-attributes")
    p.add_argument("--container", help="TargetContainerHostname: the container of a Direct endpoint")
    p.add_argument("--target-model", help="TargetModel: the model of a multi-model endpoint (e.g. a.tar.gz)")
    p.add_argument(
        "--stream",
        action="store_true",
        help="call InvokeEndpointWithResponseStream and write each part as it arrives",
    )
    p.add_argument("--output", "-o")
    p.set_defaults(func=cmd_invoke)

    p = client_cmd("ls", "list endpoints")
    p.set_defaults(func=cmd_ls)

    p = client_cmd("logs", "print an endpoint's container logs")
    p.add_argument("endpoint")
    p.add_argument("--variant")
    p.add_argument("--instance")
    p.add_argument("--tail", type=int)
    p.add_argument("--follow", "-f", action="store_true", help="stream new lines until Ctrl-C")
    p.set_defaults(func=cmd_logs)

    p = client_cmd("metrics", "an endpoint's SageMaker metrics by period (CloudWatch's names)")
    p.add_argument("endpoint")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.set_defaults(func=cmd_metrics)

    p = client_cmd("profile", "the cold start of an endpoint's last instance start, phase by phase")
    p.add_argument("endpoint")
    p.add_argument("--all", action="store_true", help="every instance start the server measured")
    p.add_argument("--json", action="store_true", help="print the admin route's JSON")
    p.set_defaults(func=cmd_profile)

    p = client_cmd("delete", "delete an endpoint (and, unless told otherwise, its config and models)")
    p.add_argument("endpoint")
    p.add_argument("--keep-definitions", action="store_true")
    p.set_defaults(func=cmd_delete)

    p = client_cmd("down", "stop the server of a state dir and its containers")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument(
        "--state-dir",
        help=f"the state dir whose server and containers to stop (default: {DEFAULT_STATE_DIR}, "
        "the default server's); its server.json says where that server listens",
    )
    p.add_argument(
        "--all", action="store_true", help="also stop every other smlocal container on this engine"
    )
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("demo", help="build the Stable Diffusion sample, deploy it, invoke it, write a PNG")
    p.add_argument("--out", default=DEMO_OUT, help=f"the PNG to write (default {DEMO_OUT})")
    p.add_argument("--prompt", help="the prompt (default: a lighthouse on a cliff at sunset, oil painting)")
    p.add_argument(
        "--gpu", action="store_true", help="deploy on ml.g5.xlarge: the GPU, when the engine has one"
    )
    p.add_argument(
        "--torch",
        choices=("cpu", "cuda"),
        default="cpu",
        help="torch build in the image: cpu (default), or cuda for --gpu (downloads several GB of wheels)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="the server's port (0: any free port)")
    p.add_argument("--keep", action="store_true", help="keep the endpoint and serve until Ctrl-C")
    p.add_argument("--state-dir", default=".smlocal/demo", help="the server's state dir")
    p.add_argument("--build-dir", default=".smlocal/build", help="wheelhouse, build context, model.tar.gz")
    p.add_argument("--steps", type=int, default=4, help="inference steps (default 4)")
    p.add_argument("--size", type=int, default=64, help="image width and height in pixels (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--stream",
        action="store_true",
        help="invoke with InvokeEndpointWithResponseStream: a progress bar fed by the streamed steps",
    )
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("check", help="check an image against SageMaker's hosting contract")
    check_arguments(p)
    p.set_defaults(func=cmd_check, releases_signals=True)  # once its Ctrl-C/SIGTERM handlers are in
    return parser


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not getattr(args, "releases_signals", False):
        release_signals()  # held by a launcher (emulator.interrupts): this command handles them as it did
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:  # a line per request: DEBUG only
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args))
    except SmlocalError as exc:
        print(f"smlocal: {exc.message}", file=sys.stderr)
        return 1
    except Exception as exc:  # botocore's errors: one line, not a traceback
        from botocore.exceptions import BotoCoreError

        if isinstance(exc, BotoCoreError) or hasattr(exc, "response"):  # ParamValidationError, ClientError
            print(f"smlocal: {_one_line(str(exc))}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
