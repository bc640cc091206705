"""One endpoint through a running server: `smlocal deploy`, `invoke`, `ls`, `logs`, `metrics`, `delete`.

deploy, invoke, ls and delete call the SageMaker APIs with boto3; logs and metrics call smlocal's
admin routes.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from pathlib import Path
from typing import Any

from emulator.admin_client import admin_request, admin_stream, error_message
from emulator.commands.client import endpoint_url, sagemaker_clients
from emulator.errors import SmlocalError
from emulator.interrupts import interrupt_handled


def _default_name(image: str) -> str:
    repo = image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", repo).strip("-")[:40] or "model"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _wait_in_service(sm: Any, name: str, timeout_s: float) -> dict[str, Any]:
    from rich.console import Console

    console = Console(stderr=True)
    deadline = time.monotonic() + timeout_s
    with console.status(f"Creating endpoint {name}...") as status:
        while True:
            described: dict[str, Any] = sm.describe_endpoint(EndpointName=name)
            state = described["EndpointStatus"]
            status.update(f"Endpoint {name}: {state}")
            if state != "Creating" or time.monotonic() > deadline:
                return described
            time.sleep(0.2)


def _model_request(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """CreateModel's members: PrimaryContainer for IMAGE, Containers (+ the mode) for --container."""
    env = dict(args.env)  # (key, value) pairs: the parser's _key_value checked each
    if args.multi_model and (args.container or args.model_data):
        raise SmlocalError(
            "--multi-model takes IMAGE and the PREFIX of its models, not --container or --model-data."
        )
    if args.container:
        if args.image or args.model_data:
            raise SmlocalError(
                "Give either IMAGE [--model-data URL] or --container NAME=IMAGE[,model=URL], not both."
            )
        containers: list[dict[str, Any]] = []
        for hostname, image, model in args.container:
            container: dict[str, Any] = {"ContainerHostname": hostname, "Image": image, "Environment": env}
            if model:
                container["ModelDataUrl"] = model
            containers.append(container)
        mode = "Direct" if args.mode == "direct" else "Serial"
        return {"ModelName": name, "Containers": containers, "InferenceExecutionConfig": {"Mode": mode}}
    if not args.image:
        raise SmlocalError(
            "Give the model's IMAGE, or its containers with --container NAME=IMAGE[,model=URL]."
        )
    if args.mode:
        raise SmlocalError("--mode applies to a multi-container model: give its containers with --container.")
    primary: dict[str, Any] = {"Image": args.image, "Environment": env}
    if args.model_data:
        primary["ModelDataUrl"] = args.model_data
    if args.multi_model:
        primary.update(Mode="MultiModel", ModelDataUrl=args.multi_model)
    return {"ModelName": name, "PrimaryContainer": primary}


def cmd_deploy(args: argparse.Namespace) -> int:
    sm, _ = sagemaker_clients(args)
    name = args.name or _default_name(
        args.image or args.container[0][1] if (args.image or args.container) else "model"
    )
    sm.create_model(**_model_request(args, name))
    variant = {
        "VariantName": args.variant_name,
        "ModelName": name,
        "InitialInstanceCount": args.instance_count,
        "InstanceType": args.instance_type,
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    if args.no_wait:
        print(name)
        return 0
    described = _wait_in_service(sm, name, args.timeout)
    if described["EndpointStatus"] != "InService":
        print(
            f"Endpoint {name} is {described['EndpointStatus']}: {described.get('FailureReason', '')}",
            file=sys.stderr,
        )
        return 1
    print(name)
    return 0


def cmd_invoke(args: argparse.Namespace) -> int:
    _, rt = sagemaker_clients(args)
    if args.body_file:
        try:
            body = Path(args.body_file).read_bytes()
        except OSError as exc:
            raise SmlocalError(f"Cannot read --body-file {args.body_file}: {exc.strerror or exc}") from exc
    else:
        body = args.body.encode()
    kwargs: dict[str, Any] = {"EndpointName": args.endpoint, "Body": body}
    if args.content_type:
        kwargs["ContentType"] = args.content_type
    if args.accept:
        kwargs["Accept"] = args.accept
    if args.custom_attributes:
        kwargs["CustomAttributes"] = args.custom_attributes
    if args.container:
        kwargs["TargetContainerHostname"] = args.container
    if args.stream:
        return _invoke_stream(rt, kwargs, args.output)
    if args.target_model:
        kwargs["TargetModel"] = args.target_model
    response = rt.invoke_endpoint(**kwargs)
    data = response["Body"].read()
    if args.output:
        Path(args.output).write_bytes(data)
        print(f"{len(data)} bytes ({response.get('ContentType')}) written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(data)
        if not data.endswith(b"\n"):
            sys.stdout.buffer.write(b"\n")
    return 0


def _invoke_stream(rt: Any, kwargs: dict[str, Any], output: str | None) -> int:
    """InvokeEndpointWithResponseStream: each part written (and flushed) as it arrives; a
    ModelStreamError after some parts is raised after they are out (main prints it)."""
    response = rt.invoke_endpoint_with_response_stream(**kwargs)
    size = 0
    last = b"\n"
    with open(output, "wb") if output else contextlib.nullcontext(sys.stdout.buffer) as out:
        for event in response["Body"]:
            part = event.get("PayloadPart", {}).get("Bytes", b"")
            if part:
                out.write(part)
                out.flush()
                size += len(part)
                last = part
    if output:
        print(f"{size} bytes ({response.get('ContentType')}) written to {output}", file=sys.stderr)
    elif not last.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    sm, _ = sagemaker_clients(args)
    table = Table("endpoint", "status", "created", "failure reason")
    for page in sm.get_paginator("list_endpoints").paginate():
        for e in page["Endpoints"]:
            reason = ""
            if e["EndpointStatus"] == "Failed":
                reason = sm.describe_endpoint(EndpointName=e["EndpointName"]).get("FailureReason", "")
            table.add_row(e["EndpointName"], e["EndpointStatus"], str(e["CreationTime"]), reason)
    Console().print(table)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    import httpx

    params = {k: v for k, v in (("variant", args.variant), ("instance", args.instance)) if v}
    if args.tail:
        params["tail"] = str(args.tail)
    base, path = endpoint_url(args), f"endpoints/{args.endpoint}/logs"
    if args.follow:
        params["follow"] = "1"
        try:
            with admin_stream(base, path, params=params, timeout=httpx.Timeout(30, read=None)) as stream:
                if stream.status_code != 200:
                    stream.read()
                    print(f"smlocal: {error_message(stream)}", file=sys.stderr)
                    return 1
                for chunk in stream.iter_text():
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
        except KeyboardInterrupt:  # Ctrl-C ends a follow: exit 0
            interrupt_handled()
            return 0
        return 0
    resp = admin_request(base, "GET", path, params=params)
    if resp.status_code != 200:
        print(f"smlocal: {error_message(resp)}", file=sys.stderr)
        return 1
    sys.stdout.write(resp.text)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    import json

    from emulator.metrics_table import print_metrics

    resp = admin_request(endpoint_url(args), "GET", f"endpoints/{args.endpoint}/metrics")
    if resp.status_code != 200:
        print(f"smlocal: {error_message(resp)}", file=sys.stderr)
        return 1
    report = resp.json()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print_metrics(report, args.endpoint)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    sm, _ = sagemaker_clients(args)
    described = sm.describe_endpoint(EndpointName=args.endpoint)
    sm.delete_endpoint(EndpointName=args.endpoint)
    if not args.keep_definitions:
        config_name = described["EndpointConfigName"]
        config = sm.describe_endpoint_config(EndpointConfigName=config_name)
        sm.delete_endpoint_config(EndpointConfigName=config_name)
        for variant in config["ProductionVariants"]:
            try:
                sm.delete_model(ModelName=variant["ModelName"])
            except sm.exceptions.ClientError:
                pass
    print(f"deleting {args.endpoint}", file=sys.stderr)
    return 0
