"""known_members.json, the snapshot emulator/wire/unsupported.py refuses unseen members against: the
members of every input structure of the operations smlocal serves, per service, as the installed
botocore's models have them. `python3 -m emulator.wire.known_members` rewrites it; do that once smlocal
handles, refuses or deliberately ignores the members a newer botocore added."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import botocore as installed
import botocore.model

from emulator.wire import autoscaling_api, cloudwatch_api, control_api
from emulator.wire.service_models import (
    APPLICATION_AUTOSCALING,
    CLOUDWATCH,
    SAGEMAKER,
    SAGEMAKER_RUNTIME,
    operation_model,
)
from emulator.wire.unsupported import KNOWN_MEMBERS_FILE, RUNTIME_OPERATIONS

#: service -> the operations smlocal serves of it
SERVED: dict[str, Iterable[str]] = {
    SAGEMAKER: control_api.OPERATIONS,
    APPLICATION_AUTOSCALING: autoscaling_api.OPERATIONS,
    CLOUDWATCH: cloudwatch_api.OPERATIONS,
    SAGEMAKER_RUNTIME: RUNTIME_OPERATIONS,
}


def _collect(shape: botocore.model.Shape, shapes: dict[str, list[str]]) -> None:
    if shape.type_name == "structure" and shape.name not in shapes:
        shapes[shape.name] = sorted(shape.members)
        for member in shape.members.values():
            _collect(member, shapes)
    elif shape.type_name == "list":
        _collect(shape.member, shapes)
    elif shape.type_name == "map":
        _collect(shape.value, shapes)


def snapshot(services: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """known_members.json's document for the installed botocore: service -> input structure ->
    its members, for the given operations of each service."""
    out: dict[str, dict[str, list[str]]] = {}
    for service, operations in services.items():
        shapes: dict[str, list[str]] = {}
        for operation in sorted(operations):
            _collect(operation_model(service, operation).input_shape, shapes)
        out[service] = dict(sorted(shapes.items()))
    return {"_comment": _SNAPSHOT_COMMENT, "botocore": installed.__version__, "services": out}


_SNAPSHOT_COMMENT = (
    "The members of every input structure of the operations smlocal serves, as the botocore models it "
    "was built against have them (emulator/wire/unsupported.py): a member not listed here is refused as "
    "not supported yet. Regenerate (python3 -m emulator.wire.known_members) once smlocal handles, refuses "
    "or deliberately ignores a newer model's members."
)


def main() -> None:
    """Rewrite known_members.json from the installed botocore's models."""
    document = snapshot(SERVED)
    path = Path(__file__).with_name(KNOWN_MEMBERS_FILE)
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{path}: botocore {document['botocore']}")


if __name__ == "__main__":
    main()
