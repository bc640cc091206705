"""The payload options of `smlocal check` and of the pytest plugin (--payload, --content-type,
--accept and the streaming ones, or their --sagemaker-... spellings) read into CheckConfig's fields.

Imports only argparse and the standard library at import time (the pytest plugin loads it in every run).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """The command line cannot be run as given (exit 2)."""


#: Where the payload options are recorded, in command-line order: [(kind, value)], kind one of PAYLOAD_KINDS.
PAYLOAD_OPTIONS = "payload_options"
PAYLOAD_KINDS = ("payload", "content_type", "accept")


class PayloadOption(argparse.Action):
    """--payload FILE, --content-type T and --accept T (or the plugin's --sagemaker-... ones), kept in
    command-line order: a content type or accept applies to the --payload before it, and one given
    before any --payload to the first (see payload_fields)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        kind = self.option_strings[-1].removeprefix("--").removeprefix("sagemaker-").replace("-", "_")
        items = list(getattr(namespace, PAYLOAD_OPTIONS, None) or [])
        items.append((kind, str(values)))
        setattr(namespace, PAYLOAD_OPTIONS, items)


def payload_fields(items: Sequence[tuple[str, str]], prefix: str = "--") -> dict[str, Any]:
    """CheckConfig's payload fields (payload, content_type, accept, extra_payloads, payload_given) from
    the payload options in command-line order; UsageError when they cannot be read or contradict.
    `prefix` is how the options are spelt in messages (`--sagemaker-` for the pytest plugin)."""
    from contract_tests.check_config import Payload

    def flag(kind: str) -> str:
        return prefix + kind.replace("_", "-")

    given: list[dict[str, str]] = []
    before: dict[str, str] = {}  # options before any --payload: the first payload's
    for kind, value in items:
        if kind == "payload":
            given.append({"payload": value})
            continue
        if not value.strip():
            raise UsageError(f"{flag(kind)} needs a media type, got {value!r}")
        entry = given[-1] if given else before
        if kind in entry:
            owner = f"{flag('payload')} {entry['payload']}" if given else "the first payload"
            raise UsageError(f"{flag(kind)} given twice for {owner}: {entry[kind]!r} and {value!r}")
        entry[kind] = value
    if given:
        for kind, value in before.items():
            if kind in given[0]:
                raise UsageError(
                    f"{flag(kind)} given twice for {flag('payload')} {given[0]['payload']}: {value!r} "
                    f"(before it) and {given[0][kind]!r}"
                )
            given[0][kind] = value
    payloads = []
    for entry in given:
        path = entry["payload"]
        try:
            body = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"{flag('payload')} {path}: {exc.strerror or exc}") from exc
        payloads.append(
            Payload(
                body,
                entry.get("content_type", "application/json"),
                entry.get("accept"),
                f"{flag('payload')} {path}",
            )
        )
    first = payloads[0] if payloads else None
    return {
        "payload": first.body if first else b"{}",
        "content_type": first.content_type if first else before.get("content_type", "application/json"),
        "accept": first.accept if first else before.get("accept"),
        "extra_payloads": tuple(payloads[1:]),
        "payload_given": bool(payloads),
        "payload_source": first.source if first else None,
    }


def stream_payload(streaming: bool, body: str | None, content_type: str | None, prefix: str = "--") -> Any:
    """CheckConfig.stream (a Payload, or None without `streaming`) from --streaming, --stream-body
    (JSON text, or @FILE) and --stream-content-type; UsageError when they cannot be used. `prefix` is how
    the options are spelt in messages (`--sagemaker-` for the pytest plugin)."""
    from contract_tests.check_config import DEFAULT_STREAM_BODY, DEFAULT_STREAM_SOURCE, Payload

    if not streaming:
        given = [
            name for name, value in (("stream-body", body), ("stream-content-type", content_type)) if value
        ]
        if given:
            raise UsageError(
                f"{prefix}{given[0]} needs {prefix}streaming (the streaming checks run only with it)"
            )
        return None
    media = "application/json" if content_type is None else content_type.strip()
    if not media:
        raise UsageError(f"{prefix}stream-content-type needs a media type, got {content_type!r}")
    if body is None:
        return Payload(DEFAULT_STREAM_BODY, media, None, DEFAULT_STREAM_SOURCE)
    if body.startswith("@"):
        try:
            data = Path(body[1:]).read_bytes()
        except OSError as exc:
            raise UsageError(f"{prefix}stream-body {body}: {exc.strerror or exc}") from exc
    else:
        data = body.encode()
    if media.split(";")[0].strip().lower().endswith(("/json", "+json")):
        import json

        try:
            json.loads(data)
        except ValueError as exc:
            raise UsageError(
                f"{prefix}stream-body is not JSON ({exc}); give JSON, @FILE, or another "
                f"{prefix}stream-content-type"
            ) from exc
    return Payload(data, media, None, f"{prefix}stream-body")
