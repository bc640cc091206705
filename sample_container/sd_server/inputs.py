"""The body of POST /invocations, parsed and checked: pure functions, no torch, no aiohttp.

A request is a JSON object:

    {"prompt": "a lighthouse at dusk",        # required string (may be empty: unconditional)
     "negative_prompt": "blurry",             # optional string
     "num_inference_steps": 25,               # 1 .. Limits.max_steps
     "guidance_scale": 7.5,                   # 0 .. Limits.max_guidance
     "seed": 1234,                            # 0 .. 2**63-1; random when absent (and returned)
     "height": 512, "width": 512,             # >= 8; rounded down to a multiple of 8, clipped to max_side
     "stream": false}                         # true: a streamed answer (as Accept application/x-ndjson)

Anything else (not JSON, not an object, an unknown field, a wrong type or range) is a RequestError
with status 400 and a message meant for the caller; an unsupported Content-Type is 415 and an Accept
that allows neither PNG nor JSON (nor the streamed NDJSON) is 406. The server turns a RequestError into
`{"error": message}`.

The answer's form comes from Accept: image/png (the default), application/json (the PNG in base64), or
application/x-ndjson: a streamed answer, one JSON line per denoising step, then the image (streaming.py).
A body with "stream": true streams too, whatever the Accept (the way LLM servers are asked to stream, and
what a client that cannot set Accept can send).
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

#: Image sides are multiples of this (Stable Diffusion's VAE scale factor).
SIDE_STEP = 8
MAX_SEED = 2**63 - 1
FIELDS = (
    "prompt",
    "negative_prompt",
    "num_inference_steps",
    "guidance_scale",
    "seed",
    "height",
    "width",
    "stream",
)

OutputFormat = Literal["png", "json", "ndjson"]
#: The Accept that asks for a streamed answer (newline-delimited JSON, written as the steps finish).
NDJSON = "application/x-ndjson"


@dataclass(frozen=True)
class Limits:
    """What the server accepts; the defaults keep a PNG (even in base64 JSON) under SageMaker's 6 MB cap."""

    max_side: int = 1024
    max_steps: int = 150
    max_guidance: float = 50.0
    max_prompt_chars: int = 10_000
    default_side: int = 512
    default_steps: int = 25
    default_guidance: float = 7.5


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class GenerationRequest:
    """One image to make; every field is validated and defaults are filled in."""

    prompt: str
    num_inference_steps: int
    guidance_scale: float
    seed: int
    height: int
    width: int
    negative_prompt: str | None = None
    #: the body asked for a streamed answer ("stream": true)
    stream: bool = False


class RequestError(ValueError):
    """A request the server refuses: `status` (400, 406, 415) and a message for the caller."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def random_seed() -> int:
    """A fresh seed for a request without one (32 bits: easy to read back and to type)."""
    return secrets.randbelow(2**32)


def _reject_constant(name: str) -> float:
    raise RequestError(f"the body is not valid JSON: {name} is not a JSON number")


def parse_request(
    body: bytes, limits: Limits = DEFAULT_LIMITS, new_seed: Callable[[], int] = random_seed
) -> GenerationRequest:
    """The request in `body` (JSON bytes), or RequestError(400) saying what is wrong with it."""
    if not body.strip():
        raise RequestError('the body is empty: send a JSON object such as {"prompt": "a red bicycle"}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not UTF-8 text: {exc}") from exc
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too many digits, nesting too deep
        raise RequestError(f"the body is not valid JSON: {exc}") from exc
    return parse_fields(data, limits, new_seed)


def parse_fields(
    data: object, limits: Limits = DEFAULT_LIMITS, new_seed: Callable[[], int] = random_seed
) -> GenerationRequest:
    """The request in an already decoded JSON value (see parse_request)."""
    if not isinstance(data, Mapping):
        raise RequestError(f"the body must be a JSON object, not {_json_type(data)}")
    unknown = sorted(str(k) for k in data if k not in FIELDS)
    if unknown:
        raise RequestError(f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
    if "prompt" not in data:
        raise RequestError('"prompt" is required (a string)')
    prompt = _string(data, "prompt", limits.max_prompt_chars)
    negative = (
        _string(data, "negative_prompt", limits.max_prompt_chars) if "negative_prompt" in data else None
    )
    steps = _integer(data, "num_inference_steps", limits.default_steps, 1, limits.max_steps)
    guidance = _number(data, "guidance_scale", limits.default_guidance, 0.0, limits.max_guidance)
    seed = _optional_integer(data, "seed", 0, MAX_SEED)
    return GenerationRequest(
        prompt=prompt,
        negative_prompt=negative,
        num_inference_steps=steps,
        guidance_scale=guidance,
        seed=new_seed() if seed is None else seed,
        height=_side(data, "height", limits),
        width=_side(data, "width", limits),
        stream=_flag(data, "stream"),
    )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, int):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _string(data: Mapping[str, object], name: str, max_chars: int) -> str:
    value = data[name]
    if not isinstance(value, str):
        raise RequestError(f'"{name}" must be a string, not {_json_type(value)}')
    if len(value) > max_chars:
        raise RequestError(f'"{name}" is {len(value)} characters long; at most {max_chars} are accepted')
    return value


def _integer(data: Mapping[str, object], name: str, default: int, low: int, high: int) -> int:
    value = _optional_integer(data, name, low, high)
    return default if value is None else value


def _optional_integer(data: Mapping[str, object], name: str, low: int, high: int) -> int | None:
    """The integer field `name` when present and not null, checked against [low, high]."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f'"{name}" must be an integer, not {_json_type(value)}')
    if not low <= value <= high:
        raise RequestError(f'"{name}" must be between {low} and {high}, not {value}')
    return value


def _flag(data: Mapping[str, object], name: str) -> bool:
    value = data.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f'"{name}" must be true or false, not {_json_type(value)}')
    return value


def _number(data: Mapping[str, object], name: str, default: float, low: float, high: float) -> float:
    if name not in data or data[name] is None:
        return default
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f'"{name}" must be a number, not {_json_type(value)}')
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise RequestError(f'"{name}" must be between {low:g} and {high:g}, not {value}')
    return number


def _side(data: Mapping[str, object], name: str, limits: Limits) -> int:
    """A side in pixels: at least 8, rounded down to a multiple of 8, clipped to limits.max_side."""
    value = _integer(data, name, limits.default_side, SIDE_STEP, 2**31)
    top = limits.max_side - limits.max_side % SIDE_STEP
    return min(value - value % SIDE_STEP, top)


# ------------------------------------------------------------------------------- content negotiation


def _media_types(header: str) -> list[tuple[str, float]]:
    """(type, q) for each media range of an Accept header, lower-cased, in the order given."""
    found: list[tuple[str, float]] = []
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        if not fields[0]:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, raw = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(raw)
                except ValueError:
                    q = 1.0
        found.append((fields[0].lower(), q))
    return found


def check_content_type(header: str | None) -> None:
    """Accept a JSON Content-Type (application/json, text/json, application/*+json) or none at all."""
    if header is None or not header.strip():
        return  # tolerated: the body is parsed as JSON anyway
    media = header.split(";", 1)[0].strip().lower()
    if media in ("application/json", "text/json") or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return
    raise RequestError(f"Content-Type {media} is not supported: send a JSON body as application/json", 415)


def output_format(accept: str | None) -> OutputFormat:
    """NDJSON (streamed) when Accept names application/x-ndjson; else JSON when it allows
    application/json; else PNG when it allows image/png (or is absent).

    Streaming is asked for by name only: a wildcard (*/*, application/*) never selects it, so clients
    that send one keep getting one answer. An Accept that allows none (e.g. text/csv alone) is
    RequestError(406).
    """
    if accept is None or not accept.strip():
        return "png"
    allowed = {media for media, q in _media_types(accept) if q > 0}
    if NDJSON in allowed:
        return "ndjson"
    if allowed & {"application/json", "application/*"}:
        return "json"
    if allowed & {"image/png", "image/*", "*/*"}:
        return "png"
    raise RequestError(
        f"Accept {accept} allows no answer this server makes: "
        f"image/png, application/json or {NDJSON} (streamed)",
        406,
    )
