"""model-data checks: the model data can be fetched and extracted as SageMaker does (hosting contract §3.2).

The work is Target.model_data (the emulator's own ArtifactStore: CreateModel's existence check, then the
endpoint's download and extraction, with the emulator's archive limits); this check reports it, with
SageMaker's texts as the emulator writes them. Every check that needs a container is SKIPPED with a
pointer here when the model data cannot be used.
"""

from __future__ import annotations

from pathlib import Path

from contract_tests.multi_model import (
    ARTIFACT_SUFFIX,
    MODELS_ROOT,
    MULTI_MODEL_OPTION,
    MmeArtifacts,
    MmeDataProblem,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import MODEL_DATA_CHECK, CheckContext, ModelDataProblem
from emulator.model.containers import MULTI_MODELS_LABEL

MODEL_DATA_FIX = (
    "Package the model as a gzipped tar with the files at its root (tar -czf model.tar.gz -C model_dir .), "
    "upload it to the URL the model's ModelDataUrl names, and make sure the execution role can read it "
    "(s3:GetObject). Keep it within the archive limits (no huge headers, no decompression bombs)."
)


def _tree_size(root: Path) -> tuple[int, int]:
    files = size = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            size += path.stat().st_size
    return files, size


@check(
    MODEL_DATA_CHECK,
    "the model data downloads and extracts",
    "SageMaker downloads ModelDataUrl and extracts the gzipped tar into /opt/ml/model before it starts the "
    "container; CreateModel refuses a URL with no object behind it, and an archive that cannot be fetched "
    "or extracted fails the endpoint with a FailureReason (hosting contract §3.2). The check does what the "
    "emulator does, with its archive limits and texts.",
    MODEL_DATA_FIX,
    before="tar -cf model.tar.gz model/   # not gzipped, files under model/",
    after="tar -czf model.tar.gz -C model .   # gzipped, files at the archive's root",
)
def extracts(ctx: CheckContext) -> str:
    config = ctx.config
    uri = config.model_data
    if not uri and not config.multi_model_data:
        raise CheckSkipped(
            "no --model-data given: the container gets an empty /opt/ml/model, as SageMaker mounts one "
            "for a model without ModelDataUrl"
        )
    ctx.evidence["model_data"] = uri
    if config.multi_model_data:
        ctx.evidence["multi_model_data"] = config.multi_model_data
    plan = ctx.target.data_plan
    multi = _multi_model(ctx, plan.multi) if ctx.target.multi_model and plan.multi else None
    if plan.single_from_prefix:
        got = ctx.target.mme_artifacts
        assert isinstance(got, MmeArtifacts)  # _multi_model failed the check otherwise
        first = got.models[0].target_model
        ctx.evidence["single_model_artifact"] = first
        return (
            f"{multi}. The single-model checks get its first artifact, {first}, extracted at /opt/ml/model "
            f"(give the single-model data with --model-data and the prefix with {MULTI_MODEL_OPTION} to "
            f"choose)"
        )
    single = (
        _single_model(ctx, plan.single) if plan.single else "no single-model data: /opt/ml/model is empty"
    )
    if not ctx.target.multi_model:
        if config.multi_model_data:
            ctx.warn(
                f"{MULTI_MODEL_OPTION} {config.multi_model_data} unused: the image has no label "
                f"{MULTI_MODELS_LABEL}=true, so the mme.* checks do not run"
            )
        return single
    if multi is None:
        return (
            f"{single}; no multi-model data ({uri} holds no *{ARTIFACT_SUFFIX}): the mme.* checks that load "
            f"a model are skipped; give a prefix of model.tar.gz files with {MULTI_MODEL_OPTION}"
        )
    return f"{single}; {multi}"


def _single_model(ctx: CheckContext, uri: str) -> str:
    got = ctx.target.model_data
    if isinstance(got, ModelDataProblem):
        ctx.evidence.update(stage=got.stage, sagemaker_message=got.message, detail=got.detail)
        if got.stage == "CreateModel":
            seen = f"SageMaker's CreateModel refuses this model data (ValidationException): {got.message}"
        else:
            seen = f"the endpoint would fail with the FailureReason: {got.message}"
        cause = f" (what failed: {got.detail})" if got.detail and got.detail != got.message else ""
        raise CheckFailed(
            f"{seen}{cause} No container was started; the checks that need one are skipped. "
            f"Fix: {MODEL_DATA_FIX}"
        )
    files, size = _tree_size(got)
    ctx.evidence.update(model_dir=str(got), files=files, bytes=size)
    return f"{uri} extracted: {files} file(s), {size} bytes, mounted read-only at /opt/ml/model"


def _multi_model(ctx: CheckContext, uri: str) -> str:
    """A multi-model image's prefix (or folder) of artifacts, each extracted on its own."""
    got = ctx.target.mme_artifacts
    if isinstance(got, MmeDataProblem):
        raise CheckFailed(
            f"the image carries {MULTI_MODELS_LABEL}=true, so {uri} is its multi-model prefix, but "
            f"{got.message}. The mme.* checks that load a model are skipped"
            + (
                ", and so are the single-model checks (they get its first artifact)."
                if ctx.target.data_plan.single_from_prefix
                else "."
            )
        )
    assert got is not None
    ctx.evidence.update(found=got.found, used=[m.target_model for m in got.models])
    sizes = [_tree_size(m.host_dir) for m in got.models]
    shown = ", ".join(
        f"{m.target_model} ({n} file(s), {b} bytes)" for m, (n, b) in zip(got.models, sizes, strict=True)
    )
    return (
        f"{uri} holds {got.found} artifact(s) (a multi-model prefix: the image carries "
        f"{MULTI_MODELS_LABEL}=true); extracted {shown} under {MODELS_ROOT}/{{model_name}}/model, read-only"
    )
