"""`smlocal serve --instance-quota`: the account's instances per instance type for endpoint usage
(SageMaker's per-type service quotas, ResourceLimitExceeded when a change would pass one).

    --instance-quota 20                 every instance type: 20 instances (the default)
    --instance-quota ml.g5.xlarge=2     this type: 2 (repeatable; the others keep the default)
"""

from __future__ import annotations

import argparse

from emulator.config import DEFAULT_INSTANCE_QUOTA


def _quota(text: str) -> tuple[str | None, int]:
    """`N` (every type) or `TYPE=N` (one type); N a whole number >= 0."""
    instance_type, sep, number = text.rpartition("=")
    if sep and not instance_type:
        raise argparse.ArgumentTypeError(f"{text!r}: an instance type must come before '='")
    try:
        value = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or TYPE=N with N a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a quota cannot be negative")
    return (instance_type or None), value


def add_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--instance-quota",
        type=_quota,
        action="append",
        default=[],
        metavar="N|TYPE=N",
        help="instances per instance type the account may use for endpoints, as SageMaker's quotas: "
        "CreateEndpoint, UpdateEndpoint, UpdateEndpointWeightsAndCapacities and autoscaling past it "
        f"answer ResourceLimitExceeded (N: every type; TYPE=N: one type; repeatable; default: "
        f"{DEFAULT_INSTANCE_QUOTA} for every type)",
    )


def quotas(args: argparse.Namespace) -> tuple[int, tuple[tuple[str, int], ...]]:
    """(the limit of every type, the limits of single types) from the parsed options (last wins)."""
    default = DEFAULT_INSTANCE_QUOTA
    per_type: dict[str, int] = {}
    for instance_type, value in args.instance_quota:
        if instance_type is None:
            default = value
        else:
            per_type[instance_type] = value
    return default, tuple(sorted(per_type.items()))
