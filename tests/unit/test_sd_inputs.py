"""The sample server's request parsing: defaults, clipping, and a 400/406/415 reason for each bad input."""

from __future__ import annotations

import json

import pytest

from sample_container.sd_server.inputs import (
    DEFAULT_LIMITS,
    MAX_SEED,
    GenerationRequest,
    Limits,
    RequestError,
    check_content_type,
    output_format,
    parse_request,
)


def parse(body: object, limits: Limits = DEFAULT_LIMITS) -> GenerationRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_request(raw, limits, new_seed=lambda: 4242)


def test_defaults() -> None:
    assert parse({"prompt": "a cat"}) == GenerationRequest(
        prompt="a cat",
        num_inference_steps=25,
        guidance_scale=7.5,
        seed=4242,
        height=512,
        width=512,
        negative_prompt=None,
    )


def test_all_fields() -> None:
    got = parse(
        {
            "prompt": "",
            "negative_prompt": "blurry",
            "num_inference_steps": 3,
            "guidance_scale": 0,
            "seed": MAX_SEED,
            "height": 64,
            "width": 128,
        }
    )
    assert got == GenerationRequest("", 3, 0.0, MAX_SEED, 64, 128, "blurry")
    assert isinstance(got.guidance_scale, float)


def test_null_means_default() -> None:
    got = parse({"prompt": "x", "seed": None, "num_inference_steps": None, "height": None})
    assert (got.seed, got.num_inference_steps, got.height) == (4242, 25, 512)


def test_random_seed_when_absent() -> None:
    seeds = {parse_request(b'{"prompt": "x"}').seed for _ in range(20)}
    assert len(seeds) > 1 and all(0 <= s < 2**32 for s in seeds)


@pytest.mark.parametrize(
    ("asked", "got"),
    [(64, 64), (65, 64), (71, 64), (8, 8), (1024, 1024), (1030, 1024), (100_000, 1024)],
)
def test_sides_round_down_to_8_and_clip_to_max(asked: int, got: int) -> None:
    request = parse({"prompt": "x", "height": asked, "width": asked})
    assert (request.height, request.width) == (got, got)


def test_max_side_is_configurable() -> None:
    request = parse({"prompt": "x", "height": 1000, "width": 300}, Limits(max_side=260))
    assert (request.height, request.width) == (256, 256)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "the body is empty"),
        (b"   \n", "the body is empty"),
        (b"\xff\xfe", "not UTF-8"),
        (b"{", "not valid JSON"),
        (b'{"prompt": NaN}', "not valid JSON: NaN"),
        (b'{"prompt": "x", "guidance_scale": Infinity}', "not valid JSON: Infinity"),
        (b'{"prompt": "x", "seed": 1' + b"0" * 5000 + b"}", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
        ([], "must be a JSON object, not an array"),
        ("a cat", "must be a JSON object, not a string"),
        (None, "must be a JSON object, not null"),
        ({}, '"prompt" is required'),
        ({"text": "x"}, "unknown field(s) text"),
        ({"prompt": "x", "steps": 3, "Seed": 1}, "unknown field(s) Seed, steps"),
        ({"prompt": 3}, '"prompt" must be a string, not the number 3'),
        ({"prompt": None}, '"prompt" must be a string, not null'),
        ({"prompt": "x" * 10_001}, "at most 10000"),
        ({"prompt": "x", "negative_prompt": ["a"]}, '"negative_prompt" must be a string, not an array'),
        ({"prompt": "x", "num_inference_steps": 0}, '"num_inference_steps" must be between 1 and 150, not 0'),
        ({"prompt": "x", "num_inference_steps": 151}, "between 1 and 150"),
        ({"prompt": "x", "num_inference_steps": 2.5}, "must be an integer, not the number 2.5"),
        ({"prompt": "x", "num_inference_steps": "25"}, "must be an integer, not a string"),
        ({"prompt": "x", "num_inference_steps": True}, "must be an integer, not a boolean"),
        ({"prompt": "x", "guidance_scale": -1}, '"guidance_scale" must be between 0 and 50, not -1'),
        ({"prompt": "x", "guidance_scale": 50.5}, "between 0 and 50"),
        ({"prompt": "x", "guidance_scale": "7"}, '"guidance_scale" must be a number, not a string'),
        ({"prompt": "x", "guidance_scale": False}, "must be a number, not a boolean"),
        ({"prompt": "x", "seed": -1}, '"seed" must be between 0 and'),
        ({"prompt": "x", "seed": MAX_SEED + 1}, '"seed" must be between 0 and'),
        ({"prompt": "x", "seed": 1.0}, '"seed" must be an integer'),
        ({"prompt": "x", "height": 7}, '"height" must be between 8 and'),
        ({"prompt": "x", "width": 0}, '"width" must be between 8 and'),
        ({"prompt": "x", "width": {"a": 1}}, '"width" must be an integer, not an object'),
        ({"prompt": "x", "stream": "yes"}, '"stream" must be true or false, not a string'),
        ({"prompt": "x", "stream": 1}, '"stream" must be true or false, not the number 1'),
    ],
)
def test_bad_requests_say_why(body: object, reason: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse(body)
    assert caught.value.status == 400
    assert reason in caught.value.message


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "text/json",
        "application/vnd.sd+json",
    ],
)
def test_json_content_types_are_accepted(header: str | None) -> None:
    check_content_type(header)


@pytest.mark.parametrize(
    "header", ["text/csv", "application/x-www-form-urlencoded", "image/png", "text/plain"]
)
def test_other_content_types_get_415(header: str) -> None:
    with pytest.raises(RequestError) as caught:
        check_content_type(header)
    assert caught.value.status == 415
    assert "application/json" in caught.value.message


@pytest.mark.parametrize(("value", "stream"), [(True, True), (False, False), (None, False)])
def test_stream_is_an_optional_boolean(value: bool | None, stream: bool) -> None:
    assert parse({"prompt": "x", "stream": value}).stream is stream
    assert parse({"prompt": "x"}).stream is False


@pytest.mark.parametrize(
    ("accept", "fmt"),
    [
        (None, "png"),
        ("", "png"),
        ("*/*", "png"),
        ("image/png", "png"),
        ("image/*", "png"),
        ("application/json", "json"),
        ("Application/JSON; charset=utf-8", "json"),
        ("image/png, application/json", "json"),
        ("application/json;q=0, image/png", "png"),
        ("text/html, application/*;q=0.5", "json"),
        ("text/html, */*;q=0.1", "png"),
        ("application/x-ndjson", "ndjson"),
        ("Application/X-NDJSON; charset=utf-8", "ndjson"),
        ("image/png, application/x-ndjson;q=0.5", "ndjson"),  # asked for by name: it streams
        ("application/x-ndjson;q=0, application/json", "json"),
        ("application/*", "json"),  # a wildcard never selects the streamed answer
        ("*/*", "png"),
    ],
)
def test_accept_picks_the_answer(accept: str | None, fmt: str) -> None:
    assert output_format(accept) == fmt


@pytest.mark.parametrize(
    "accept", ["text/csv", "image/jpeg", "application/json;q=0", "application/x-ndjson;q=0"]
)
def test_accept_without_png_or_json_gets_406(accept: str) -> None:
    with pytest.raises(RequestError) as caught:
        output_format(accept)
    assert caught.value.status == 406
    assert caught.value.message == (
        f"Accept {accept} allows no answer this server makes: "
        "image/png, application/json or application/x-ndjson (streamed)"
    )
