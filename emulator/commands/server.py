"""The local server's lifetime: `smlocal setup` (a Docker engine, the base image), `serve`, `down`.

cmd_serve builds the frozen ServerConfig from the parsed options and the environment.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from emulator.commands import quota
from emulator.commands.client import endpoint_url
from emulator.config import ArchiveLimits, ContractLimits, ServerConfig

DEFAULT_STATE_DIR = ".smlocal"


def cmd_setup(args: argparse.Namespace) -> int:
    from emulator.runtime import setup

    return setup.main()


def cmd_serve(args: argparse.Namespace) -> int:
    from emulator.server import serve_forever

    limits = ContractLimits()
    if args.stop_grace is not None:
        limits = limits.replace(stop_grace_s=args.stop_grace)
    if args.invocation_timeout is not None:
        limits = limits.replace(invocation_timeout_s=args.invocation_timeout)
    if args.startup_timeout is not None:
        limits = limits.replace(startup_timeout_s=args.startup_timeout)
    for option, field in (
        ("stream_first_byte_timeout", "stream_first_byte_timeout_s"),
        ("stream_idle_timeout", "stream_idle_timeout_s"),
        ("stream_timeout", "stream_timeout_s"),
    ):
        if getattr(args, option) is not None:
            limits = limits.replace(**{field: getattr(args, option)})
    instance_quota, quota_by_type = quota.quotas(args)
    config = ServerConfig(
        state_dir=Path(args.state_dir).resolve(),
        host=args.host,
        port=args.port,
        region=args.region,
        account_id=args.account_id,
        limits=limits,
        s3_endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        sns_endpoint_url=os.environ.get("AWS_ENDPOINT_URL_SNS") or os.environ.get("AWS_ENDPOINT_URL"),
        time_scale=args.time_scale,
        model_load_window_s=args.model_load_window,
        multi_model_cache_gb=args.multi_model_cache_gb,
        serverless_idle_s=args.serverless_idle,
        archive_limits=ArchiveLimits(
            max_header_bytes=args.archive_max_header_bytes,
            max_entries=args.archive_max_entries,
            max_extracted_bytes=args.archive_max_bytes,
            max_ratio=args.archive_max_ratio,
            max_trailing_bytes=args.archive_max_trailing_bytes,
        ),
        local_model_dirs=tuple(Path(d).resolve() for d in args.allow_local_model_dir) or None,
        iam_policies_file=Path(args.iam_policies).resolve() if args.iam_policies else None,
        instance_quota=instance_quota,
        instance_quota_by_type=quota_by_type,
        registry_rule="strict" if args.strict_images else "any" if args.any_registry else "local-warns",
        instance_limits=not args.no_instance_limits,
    )
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        logging.warning("serving on %s: reachable from other machines", args.host)
    serve_forever(config, keep_containers=args.keep_containers, event_loop=args.event_loop)
    return 0


def registry_arguments(parser: argparse.ArgumentParser) -> None:
    """`serve --strict-images | --any-registry`: ServerConfig.registry_rule (model/image_registry.py)."""
    registry = parser.add_mutually_exclusive_group()
    registry.add_argument(
        "--strict-images",
        action="store_true",
        help="refuse at CreateModel every image SageMaker would refuse, local tags (my-model:latest) too: "
        "only ECR private of --region, or ImageConfig RepositoryAccessMode Vpc (default: local tags are "
        "accepted with a warning in the endpoint's log; docs/cloud-parity.md#registry-rules)",
    )
    registry.add_argument(
        "--any-registry",
        action="store_true",
        help="accept every image reference (Docker Hub, public.ecr.aws, other regions' ECR) with no warning, "
        "for images deployed somewhere other than SageMaker",
    )


def cmd_down(args: argparse.Namespace) -> int:
    """Stop the server of one state dir (default .smlocal) and its containers; --all: every container."""
    from emulator.down import down

    result = down(
        Path(args.state_dir or DEFAULT_STATE_DIR), endpoint_url(args), args.grace, every_container=args.all
    )
    scope = "smlocal container(s) on this engine" if args.all else "container(s) of that state dir"
    checks = f"; removed {result.check_containers} container(s) of ended `smlocal check` runs"
    print(
        f"smlocal down: {result.server}; stopped {result.containers} {scope}"
        f"{checks if result.check_containers else ''}",
        file=sys.stderr,
    )
    return 0
