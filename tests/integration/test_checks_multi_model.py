"""mme.*: the multi-model checks PASS on the multi-model test image (tests/fixtures/images/mme), each
FAILS on the twin that breaks its rule, and only there (tests/fixtures/twins/mme.*), and they are SKIPPED
with a note on an image without the label, or without --model-data. Artifacts come from a local folder
and from an S3 prefix on moto's server (smlocal check --model-data, as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contract_tests.check_config import CheckConfig
from contract_tests.checks import mme_calls
from contract_tests.registry import select
from contract_tests.result import CheckResult, Outcome
from contract_tests.runner import run_check, run_checks
from contract_tests.target import Target
from emulator.model.containers import MULTI_MODELS_LABEL
from emulator.model.messages import missing_multi_models_label
from emulator.process_owner import check_labels
from emulator.runtime import labels
from emulator.runtime.images import build_image
from tests.fixtures.docker_env import MME_TAG
from tests.fixtures.mme import mme_artifact
from tests.fixtures.s3server import ACCESS_KEY, REGION, SECRET_KEY
from tests.fixtures.twins import FAST_LIMITS

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
MME_IDS = [c.id for c in select(["mme"])]
#: Checks that need no loadable model.
WITHOUT_MODELS = {"mme.healthy", "mme.get-missing"}


@pytest.fixture(scope="session")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local multi-model prefix: two artifacts (one in a sub-folder) and a file that is none."""
    root = tmp_path_factory.mktemp("mme-prefix")
    mme_artifact(root / "a.tar.gz", "alpha")
    mme_artifact(root / "team" / "b.tar.gz", "beta")
    (root / "README.txt").write_text("not a model")
    return root


def run_all(image: str, tmp_path: Path, model_data: str | None, *, keep: bool = False) -> Any:
    """Every mme.* check against one Target; (results by id, the target) with `keep` (close it yourself)."""
    target = Target(
        CheckConfig(image=image, model_data=model_data, limits=FAST_LIMITS, cache_dir=tmp_path / "check")
    )
    checks = select(["mme"])
    if keep:
        results = [run_check(c, target) for c in checks]
        return {r.id: r for r in results}, target
    return {r.id: r for r in run_checks(checks, target)}


def test_the_good_image_passes_every_check_serving_each_model_as_itself(
    mme_image: str, prefix: Path, tmp_path: Path, docker_engine: Any
) -> None:
    results, target = run_all(mme_image, tmp_path, str(prefix), keep=True)
    try:
        assert {i: r.outcome for i, r in results.items()} == dict.fromkeys(MME_IDS, Outcome.PASSED), {
            i: r.message for i, r in results.items()
        }
        assert not any(r.warnings for r in results.values()), [r.warnings for r in results.values()]
        assert results["mme.load"].message.startswith("loaded a.tar.gz, team/b.tar.gz from /opt/ml/models/")
        assert (
            results["mme.list"].message
            == "3 loaded models listed once each in 2 pages, through nextPageToken"
        )
        assert results["mme.invoke"].message == (
            "a.tar.gz HTTP 200, team/b.tar.gz HTTP 200; a model not loaded: 404"
        )
        # The container of the run: started as SageMaker starts an MME container, the artifacts extracted
        # read-only at /opt/ml/models/{opaque name}/model, each model answering as itself.
        run = mme_calls._RUNS[target]
        assert run.container is not None
        inspected = docker_engine.containers.get(run.container.handle.id).attrs
        assert "SAGEMAKER_MULTI_MODEL=true" in inspected["Config"]["Env"]
        assert inspected["Config"]["Cmd"] == ["serve"]
        (mount,) = [m for m in inspected["Mounts"] if m["Destination"] == "/opt/ml/models"]
        assert mount["RW"] is False
        answers = {}
        for model in target.mme_artifacts.models:
            assert len(model.name) == 32 and model.target_model not in model.name
            reply = httpx.post(
                f"{run.container.base_url}/models/{model.name}/invoke",
                content=b"q",
                headers={"X-Amzn-SageMaker-Target-Model": model.target_model},
            )
            answers[model.target_model] = reply.text
        assert answers == {
            "a.tar.gz": "q|alpha|target=a.tar.gz|loads=1",
            "team/b.tar.gz": "q|beta|target=team/b.tar.gz|loads=1",
        }
    finally:
        target.close()
    assert not target.mme_artifacts.root.exists()  # the run's own folder, removed with its containers


#: twin -> (the one check it fails, what the message must say)
TWINS = {
    "mme.healthy": ("mme.healthy", "exited with code 1, while started as a single-model container it became"),
    "mme.load": ("mme.load", "but then GET /models/"),
    "mme.load.status": ("mme.load", "answered HTTP 500"),
    "mme.duplicate-load": ("mme.duplicate-load", "loading it again, POST /models answered HTTP 200"),
    "mme.get-missing": ("mme.get-missing", "answered HTTP 500"),
    "mme.get-missing.empty-200": ("mme.get-missing", "answered HTTP 200: {}"),
    "mme.list": ("mme.list", "the server ignores next_page_token"),
    "mme.list.shape": ("mme.list", 'has an entry that is not {"modelName": ..., "modelUrl": ...}'),
    "mme.invoke": ("mme.invoke", "was ever loaded, yet POST /models/"),
    "mme.unload": ("mme.unload", "still shows it"),
    "mme.unload.missing-ok": ("mme.unload", "unloading it again, DELETE /models/"),
    "mme.reload": ("mme.reload", "loading it again: POST /models answered HTTP 409"),
}


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_each_twin_fails_exactly_its_check(
    twin: str, mme_twin_image: Callable[[str], str], prefix: Path, tmp_path: Path
) -> None:
    failing, words = TWINS[twin]
    results = run_all(mme_twin_image(twin), tmp_path, str(prefix))
    outcomes = {i: r.outcome for i, r in results.items()}
    failed = [i for i, o in outcomes.items() if o is not Outcome.PASSED and o is not Outcome.SKIPPED]
    assert failed == [failing], {i: (r.outcome, r.message) for i, r in results.items()}
    result: CheckResult = results[failing]
    assert words in result.message, result.message
    assert result.doc_url == f"docs/contract.md#{failing.replace('.', '-')}"
    # Whatever the twin breaks, every other check either passes or points to the one that failed.
    for other in results.values():
        if other.outcome is Outcome.SKIPPED:
            assert f"see {failing}" in other.message or "see start.healthy" in other.message, other.message


def test_an_image_without_the_label_skips_every_check_with_a_note(echo_image: str, tmp_path: Path) -> None:
    target = Target(CheckConfig(image=echo_image, limits=FAST_LIMITS, cache_dir=tmp_path / "check"))
    try:
        results = [run_check(c, target) for c in select(["mme"])]
        ours = target.runtime.list({labels.ROLE: "check", **check_labels()})
    finally:
        target.close()
    for result in results:
        assert result.outcome is Outcome.SKIPPED, result.message
        assert result.message.startswith(f"the image has no label {MULTI_MODELS_LABEL}=true, so it cannot")
        assert f"add `LABEL {MULTI_MODELS_LABEL}=true`" in result.message
        assert f'"{missing_multi_models_label(echo_image)}"' in result.message
    assert ours == []  # judged from the image's labels alone


def test_without_model_data_the_checks_that_load_a_model_skip_saying_to_pass_it(
    mme_image: str, tmp_path: Path
) -> None:
    results = run_all(mme_image, tmp_path, None)
    for check_id, result in results.items():
        if check_id in WITHOUT_MODELS:
            assert result.outcome is Outcome.PASSED, result.message
        else:
            assert result.outcome is Outcome.SKIPPED, result.message
            assert result.message.startswith("no --model-data given: a multi-model container loads models")
            assert "Pass --model-data with an S3 prefix or a local folder of *.tar.gz" in result.message


def test_unusable_model_data_fails_model_data_extracts_and_the_loads_point_there(
    mme_image: str, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.tar.gz").write_bytes(b"not a gzip file")
    checks = select(["model-data.extracts", "mme.load"])
    config = CheckConfig(image=mme_image, multi_model_data=str(empty), cache_dir=tmp_path / "empty-c")
    extracts, loads = run_checks(checks, Target(config))
    words = f"{empty} holds no *.tar.gz artifact"
    assert extracts.outcome is Outcome.FAILED and words in extracts.message, extracts.message
    assert (loads.outcome, loads.message.endswith("see model-data.extracts")) == (Outcome.SKIPPED, True)
    config = CheckConfig(image=mme_image, model_data=str(bad), cache_dir=tmp_path / "bad-c")
    extracts, loads = run_checks(checks, Target(config))
    words = "the artifact x.tar.gz cannot be extracted as SageMaker extracts it: not a gzip file"
    assert extracts.outcome is Outcome.FAILED and words in extracts.message, extracts.message
    assert "and so are the single-model checks (they get its first artifact)" in extracts.message
    assert (loads.outcome, loads.message.endswith("see model-data.extracts")) == (Outcome.SKIPPED, True)


def test_a_model_folder_is_single_model_data_and_the_loads_skip_asking_for_the_prefix(
    mme_image: str, tmp_path: Path
) -> None:
    folder = tmp_path / "model"  # no *.tar.gz: a model folder, mounted at /opt/ml/model as it is
    folder.mkdir()
    (folder / "answer.txt").write_text("alpha")
    checks = select(["model-data.extracts", "mme.load"])
    config = CheckConfig(image=mme_image, model_data=str(folder), cache_dir=tmp_path / "c")
    extracts, loads = run_checks(checks, Target(config))
    assert extracts.outcome is Outcome.PASSED, extracts.message
    assert extracts.message.startswith(
        f"{folder} extracted: 1 file(s), 5 bytes, mounted read-only at /opt/ml"
    )
    assert extracts.message.endswith(
        f"no multi-model data ({folder} holds no *.tar.gz): the mme.* checks that load a model are skipped; "
        "give a prefix of model.tar.gz files with --multi-model-data"
    )
    assert loads.outcome is Outcome.SKIPPED
    assert loads.message.startswith(f"no multi-model data: --model-data {folder} holds no *.tar.gz")


def smlocal_check(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", "check", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), **env},
    )


@pytest.fixture
def s3_prefix(s3_client: Any, s3_bucket: str, prefix: Path) -> Iterator[str]:
    for path in sorted(prefix.rglob("*")):
        if path.is_file():
            s3_client.upload_file(str(path), s3_bucket, f"models/{path.relative_to(prefix).as_posix()}")
    yield f"s3://{s3_bucket}/models/"


def test_smlocal_check_takes_an_s3_prefix(
    mme_image: str, s3_prefix: str, s3_server: str, tmp_path: Path
) -> None:
    env = {
        "AWS_ENDPOINT_URL_S3": s3_server,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }
    report = tmp_path / "report.json"
    run = smlocal_check(
        mme_image,
        "--model-data",
        s3_prefix,
        "--check",
        "mme",
        "--check",
        "model-data",
        "--json",
        str(report),
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    assert {i: r["outcome"] for i, r in results.items()} == dict.fromkeys(
        ["model-data.extracts", *MME_IDS], "passed"
    )
    assert results["model-data.extracts"]["message"].startswith(f"{s3_prefix} holds 2 artifact(s)")
    # Not an S3 prefix at all: a usage error, as for any model data URL.
    bad = smlocal_check(mme_image, "--model-data", "s3:///models/", "--check", "mme", env=env)
    assert bad.returncode == 2 and "names no bucket" in bad.stderr, bad.stdout + bad.stderr


def test_the_pytest_plugin_takes_the_s3_prefix_too(
    mme_image: str, s3_prefix: str, s3_server: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL_S3": s3_server,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider", "-v"]
        + ["--sagemaker-image", mme_image, "--sagemaker-model-data", s3_prefix, "-k", "mme"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for check_id in MME_IDS:
        assert f"smlocal-contract::{check_id} PASSED" in run.stdout


def test_the_pytest_plugin_takes_the_single_model_data_and_the_prefix_apart(
    dual_image: str, prefix: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "answer.txt").write_text("gamma")  # no *.tar.gz: alone, the mme.* loads would skip

    def plugin(model_data: str) -> subprocess.CompletedProcess[str]:
        given = ["--sagemaker-model-data", model_data, "--sagemaker-multi-model-data", str(prefix)]
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "contract_tests.plugin", "-p", "no:cacheprovider", "-v"]
            + ["--sagemaker-image", dual_image, *given, "-k", "model-data or mme.load"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(ROOT)},
            timeout=300,
        )

    run = plugin(str(folder))
    assert run.returncode == 0, run.stdout + run.stderr
    for check_id in ("model-data.extracts", "mme.load"):
        assert f"smlocal-contract::{check_id} PASSED" in run.stdout, run.stdout
    # with the prefix given apart, --sagemaker-model-data is single-model data: a prefix there is refused
    bad = plugin("s3://b/models/")
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR, bad.stdout + bad.stderr
    assert "smlocal: --sagemaker-model-data: " in bad.stdout + bad.stderr


def test_a_describe_answering_a_one_entry_list_passes_with_a_warning(
    mme_twin_image: Callable[[str], str], prefix: Path, tmp_path: Path
) -> None:
    results = run_all(mme_twin_image("mme.load.describe-list"), tmp_path, str(prefix))
    assert {i: r.outcome for i, r in results.items()} == dict.fromkeys(MME_IDS, Outcome.PASSED)
    name = results["mme.load"].evidence["load a.tar.gz"]["model_name"]
    assert results["mme.load"].warnings[0] == (
        f"GET /models/{name} answers a JSON list holding the model's entry; SageMaker's contract says an "
        'object {"modelName": ..., "modelUrl": ...}'
    )


# ------------------------------------------------------------------ an image with both kinds of endpoint

DUAL_DIR = ROOT / "tests" / "fixtures" / "images" / "dual"
#: The single-model checks the dual image failed while its /opt/ml/model was empty.
SINGLE = ["invocations.serves", "invocations.timely"]


@pytest.fixture(scope="session")
def dual_image(docker_engine: Any, mme_image: str) -> str:
    """The dual-labelled, TorchServe-style image (tests/fixtures/images/dual, FROM the mme image)."""
    tag = MME_TAG.rsplit(":", 1)[0] + "-dual:latest"
    build_image(DUAL_DIR, tag, buildargs={"MME_IMAGE": mme_image}, client=docker_engine)
    return tag


def dual_run(
    image: str, tmp_path: Path, ids: list[str], **config: Any
) -> tuple[dict[str, CheckResult], Target]:
    target = Target(CheckConfig(image=image, limits=FAST_LIMITS, cache_dir=tmp_path / "check", **config))
    return {r.id: r for r in (run_check(c, target) for c in select(ids))}, target


def test_a_dual_image_serves_its_single_model_artifact_in_the_single_model_checks(
    dual_image: str, tmp_path: Path, docker_engine: Any
) -> None:
    # The false fail: with /opt/ml/model empty, the image (like TorchServe) keeps every invocation waiting.
    artifact = mme_artifact(tmp_path / "model.tar.gz", "alpha")
    results, target = dual_run(dual_image, tmp_path, ["model-data", *SINGLE, "mme"], model_data=str(artifact))
    try:
        outcomes = {i: r.outcome for i, r in results.items()}
        assert outcomes == dict.fromkeys(["model-data.extracts", *SINGLE, *MME_IDS], Outcome.PASSED), {
            i: r.message for i, r in results.items()
        }
        (answer,) = results["invocations.serves"].evidence["answers"]
        assert answer["status"] == 200 and '"answer": "alpha"' in answer["body"]
        assert results["mme.load"].message.startswith("loaded model.tar.gz from /opt/ml/models/")
        # the single-model container: the model at /opt/ml/model, no SAGEMAKER_MULTI_MODEL; the
        # multi-model one: SAGEMAKER_MULTI_MODEL=true
        shared = docker_engine.containers.get(target.healthy().handle.id).attrs
        assert not any(e.startswith("SAGEMAKER_MULTI_MODEL=") for e in shared["Config"]["Env"])
        (mount,) = [m for m in shared["Mounts"] if m["Destination"] == "/opt/ml/model"]
        assert mount["RW"] is False and (Path(mount["Source"]) / "answer.txt").read_text() == "alpha"
        run = mme_calls._RUNS[target]
        assert run.container is not None
        mme_env = docker_engine.containers.get(run.container.handle.id).attrs["Config"]["Env"]
        assert "SAGEMAKER_MULTI_MODEL=true" in mme_env
    finally:
        target.close()


def test_a_dual_image_given_a_prefix_serves_its_first_artifact_single_model(
    dual_image: str, prefix: Path, tmp_path: Path
) -> None:
    results, target = dual_run(
        dual_image, tmp_path, ["model-data", *SINGLE, "mme.load"], model_data=str(prefix)
    )
    target.close()
    assert {i: r.outcome for i, r in results.items()} == dict.fromkeys(
        ["model-data.extracts", *SINGLE, "mme.load"], Outcome.PASSED
    ), {i: r.message for i, r in results.items()}
    extracts = results["model-data.extracts"].message
    assert extracts.startswith(f"{prefix} holds 2 artifact(s)")
    assert "The single-model checks get its first artifact, a.tar.gz, extracted at /opt/ml/model" in extracts
    (answer,) = results["invocations.serves"].evidence["answers"]
    assert '"answer": "alpha"' in answer["body"]


def test_a_dual_image_takes_the_single_model_data_and_the_prefix_apart(
    dual_image: str, prefix: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "answer.txt").write_text("gamma")
    ids = ["model-data", "invocations.serves", "mme.load"]
    results, target = dual_run(
        dual_image, tmp_path, ids, model_data=str(folder), multi_model_data=str(prefix)
    )
    target.close()
    assert {i: r.outcome for i, r in results.items()} == dict.fromkeys(
        ["model-data.extracts", "invocations.serves", "mme.load"], Outcome.PASSED
    ), {i: r.message for i, r in results.items()}
    (answer,) = results["invocations.serves"].evidence["answers"]
    assert '"answer": "gamma"' in answer["body"]
    assert results["mme.load"].message.startswith("loaded a.tar.gz, team/b.tar.gz from /opt/ml/models/")


def test_smlocal_check_takes_the_single_model_data_and_the_prefix_apart(
    dual_image: str, prefix: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "answer.txt").write_text("gamma")
    report = tmp_path / "report.json"
    given = ["--model-data", str(folder), "--multi-model-data", str(prefix)]
    run = smlocal_check(dual_image, *given, "--check", "model-data", "--json", str(report), env={})
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"model data {folder}; multi-model data {prefix}" in " ".join(run.stdout.split())
    (result,) = json.loads(report.read_text())["results"]
    assert result["outcome"] == "passed", result["message"]
    assert result["message"].startswith(f"{folder} extracted: 1 file(s), 5 bytes, mounted read-only at")
    assert f"; {prefix} holds 2 artifact(s)" in result["message"]
    # with the prefix given apart, --model-data is single-model data: an S3 prefix there is a usage error
    bad = smlocal_check(
        dual_image, "--model-data", "s3://b/models/", "--multi-model-data", str(prefix), env={}
    )
    assert bad.returncode == 2 and "--model-data s3://b/models/" in bad.stderr, bad.stdout + bad.stderr
