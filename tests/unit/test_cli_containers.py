"""`smlocal deploy --container NAME=IMAGE[,model=URL] --mode` and `smlocal invoke --container`: what
the parser accepts and the CreateModel request it makes (the server's side is in the integration tests)."""

from __future__ import annotations

import pytest

from emulator.cli import build_parser
from emulator.commands.endpoints import _model_request
from emulator.errors import SmlocalError


def request(*argv: str) -> dict[str, object]:
    return _model_request(build_parser().parse_args(["deploy", *argv]), "m")


def test_containers_make_a_serial_model_by_default() -> None:
    got = request(
        "--container", "pre=img/a:1", "--container", "model=img/b:2,model=s3://b/m.tar.gz", "--env", "K=V"
    )
    assert got == {
        "ModelName": "m",
        "Containers": [
            {"ContainerHostname": "pre", "Image": "img/a:1", "Environment": {"K": "V"}},
            {
                "ContainerHostname": "model",
                "Image": "img/b:2",
                "Environment": {"K": "V"},
                "ModelDataUrl": "s3://b/m.tar.gz",
            },
        ],
        "InferenceExecutionConfig": {"Mode": "Serial"},
    }


def test_mode_direct() -> None:
    got = request("--container", "a=img/a", "--container", "b=img/b", "--mode", "direct")
    assert got["InferenceExecutionConfig"] == {"Mode": "Direct"}


def test_one_image_is_a_primary_container() -> None:
    got = request("img/a:1", "--model-data", "/tmp/m.tar.gz")
    assert got == {
        "ModelName": "m",
        "PrimaryContainer": {"Image": "img/a:1", "Environment": {}, "ModelDataUrl": "/tmp/m.tar.gz"},
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["img/a", "--container", "b=img/b"], "Give either IMAGE [--model-data URL] or --container"),
        ([], "Give the model's IMAGE, or its containers with --container"),
        (["img/a", "--mode", "direct"], "--mode applies to a multi-container model"),
    ],
)
def test_contradictions_are_one_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(SmlocalError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        request(*argv)


@pytest.mark.parametrize("bad", ["noimage", "=img", "a=", "a=img,weights=x", "a=img,model="])
def test_a_malformed_container_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["deploy", "--container", bad])
    assert exited.value.code == 2
    assert "expected NAME=IMAGE[,model=URL]" in capsys.readouterr().err


def test_invoke_container_is_the_target_container_hostname() -> None:
    args = build_parser().parse_args(["invoke", "e", "--container", "b"])
    assert args.container == "b"


def test_multi_model_makes_a_multi_model_primary_container() -> None:
    assert request("img/mme:1", "--multi-model", "s3://b/models/") == {
        "ModelName": "m",
        "PrimaryContainer": {
            "Image": "img/mme:1",
            "Environment": {},
            "Mode": "MultiModel",
            "ModelDataUrl": "s3://b/models/",
        },
    }
    with pytest.raises(SmlocalError, match="--multi-model takes IMAGE"):
        request("img/mme:1", "--multi-model", "s3://b/models/", "--model-data", "s3://b/m.tar.gz")


def test_invoke_takes_a_target_model() -> None:
    args = build_parser().parse_args(["invoke", "ep", "--target-model", "a.tar.gz"])
    assert args.target_model == "a.tar.gz"


def test_serve_takes_a_model_load_window() -> None:
    assert build_parser().parse_args(["serve"]).model_load_window == 60.0
    assert build_parser().parse_args(["serve", "--model-load-window", "2.5"]).model_load_window == 2.5


def test_serve_takes_a_serverless_idle_time() -> None:
    assert build_parser().parse_args(["serve"]).serverless_idle == 300.0
    assert build_parser().parse_args(["serve", "--serverless-idle", "7.5"]).serverless_idle == 7.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--serverless-idle", "0"])
