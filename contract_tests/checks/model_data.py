"""model-data checks: the model data can be fetched and extracted as SageMaker does (hosting contract §3.2).

The work is Target.model_data (the emulator's own ArtifactStore: CreateModel's existence check, then the
endpoint's download and extraction, with the emulator's archive limits); this check reports it, with
SageMaker's texts as the emulator writes them. Every check that needs a container is SKIPPED with a
pointer here when the model data cannot be used.
"""

from __future__ import annotations

from pathlib import Path

from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import MODEL_DATA_CHECK, CheckContext, ModelDataProblem

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
    uri = ctx.config.model_data
    if not uri:
        raise CheckSkipped(
            "no --model-data given: the container gets an empty /opt/ml/model, as SageMaker mounts one "
            "for a model without ModelDataUrl"
        )
    got = ctx.target.model_data
    ctx.evidence["model_data"] = uri
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
