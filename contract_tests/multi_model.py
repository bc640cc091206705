"""Multi-model images (hosting contract §5): their artifacts, laid out as SageMaker lays them out, and the
container that the mme.* checks share.

`--model-data` of an image labelled `com.amazonaws.sagemaker.capabilities.multi-models=true` is what a
multi-model endpoint's ModelDataUrl is: an S3 prefix (or, smlocal's extension, a local folder) holding
`*.tar.gz` artifacts, or one artifact. The first MAX_ARTIFACTS of them (by name) are fetched and extracted
with the model data layer's safe extraction (its archive limits) into a host folder mounted read-only at
/opt/ml/models, each at `{model_name}/model`, where model_name is an opaque id as SageMaker's are (a
hash of the artifact's path relative to the prefix). `layout_copy` adds more names for one artifact
(hard links, no copy) when a check needs more loaded models than there are artifacts.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.config import ArchiveLimits
from emulator.model.containers import MULTI_MODELS_LABEL
from emulator.model.resources import ModelDataSource
from emulator.model_data.extract import extract_archive
from emulator.model_data.limits import ArchiveRejected
from emulator.model_data.sources import locate
from emulator.runtime.base import MODELS_DIR_IN_CONTAINER, ImageConfig

#: Where the container finds its models (mounted read-only).
MODELS_ROOT = MODELS_DIR_IN_CONTAINER
#: How many artifacts of the prefix the checks use.
MAX_ARTIFACTS = 2
ARTIFACT_SUFFIX = ".tar.gz"


def is_multi_model(image: ImageConfig) -> bool:
    return image.labels.get(MULTI_MODELS_LABEL) == "true"


@dataclass(frozen=True)
class MmeModel:
    """One model as the container is asked to load it."""

    #: the opaque model_name of POST /models
    name: str
    #: the artifact's path relative to the prefix (X-Amzn-SageMaker-Target-Model)
    target_model: str
    #: its extracted files on the host
    host_dir: Path

    @property
    def url(self) -> str:
        """The folder the container loads it from."""
        return f"{MODELS_ROOT}/{self.name}/model"


@dataclass(frozen=True)
class MmeArtifacts:
    """The models prepared from --model-data (at least one), and the host folder holding them all."""

    root: Path
    models: tuple[MmeModel, ...]
    #: how many *.tar.gz the prefix holds (the checks use the first MAX_ARTIFACTS)
    found: int


class MmeDataProblem(Exception):
    """The multi-model data cannot be used: `message` says why and what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


#: A multi-model endpoint's container gets this variable (SageMaker sets it; the dual images' serving
#: toolkits choose their mode by it: sagemaker-inference, the PyTorch and Hugging Face toolkits).
MULTI_MODEL_ENV = "SAGEMAKER_MULTI_MODEL"
#: --model-data's companion option: the multi-model prefix, when it is not --model-data itself.
MULTI_MODEL_OPTION = "--multi-model-data"


@dataclass(frozen=True)
class ModelDataPlan:
    """What each kind of endpoint gets from the user's model data. An image with the multi-models label
    can serve both (TorchServe, the PyTorch and Hugging Face deep learning containers, multi-model-server
    images carry it and are mostly deployed single-model): the single-model checks start it as a
    single-model endpoint does (the model data at /opt/ml/model, no SAGEMAKER_MULTI_MODEL), the mme.*
    checks as a multi-model endpoint does (SAGEMAKER_MULTI_MODEL=true, the prefix's artifacts)."""

    #: the single-model ModelDataUrl (None: none, or the prefix's first artifact: `single_from_prefix`)
    single: str | None
    #: the multi-model prefix (None: no multi-model data)
    multi: str | None
    #: /opt/ml/model gets the first artifact of `multi` [U]
    single_from_prefix: bool = False


def plan_model_data(model_data: str | None, multi_model_data: str | None, labelled: bool) -> ModelDataPlan:
    """Who gets what. Without the label, --model-data is single-model data (and --multi-model-data is
    unused: the mme.* checks skip). With it, --multi-model-data is the prefix when given; else
    --model-data serves both where it can [U]: one artifact (*.tar.gz) is the single-model ModelDataUrl
    and a one-model prefix; a prefix (s3://.../ or a folder of *.tar.gz) is the multi-model prefix, and
    its first artifact (by name) the single-model model data; a folder without *.tar.gz is single-model
    data only (a model folder, mounted as it is)."""
    if not labelled or multi_model_data is not None or model_data is None:
        return ModelDataPlan(model_data, multi_model_data)
    if model_data.endswith(ARTIFACT_SUFFIX):
        return ModelDataPlan(model_data, model_data)
    if not model_data.startswith("s3://"):
        path = Path(model_data.removeprefix("file://"))
        if path.is_dir() and next(path.rglob(f"*{ARTIFACT_SUFFIX}"), None) is None:
            return ModelDataPlan(model_data, None)
    return ModelDataPlan(None, model_data, single_from_prefix=True)


def locate_model_data(url: str) -> None:
    """ValidationFailed when `url` cannot be model data at all (an S3 prefix, ending in '/', counts)."""
    prefix = url.startswith("s3://") and url.endswith("/")
    source = (
        ModelDataSource(uri=url, compression="None", data_type="S3Prefix") if prefix else ModelDataSource(url)
    )
    locate(source)


def model_name(target_model: str, copy: int = 0) -> str:
    """An opaque model_name for an artifact path (SageMaker's are ids of its own, not the path)."""
    return hashlib.sha256(f"{target_model}#{copy}".encode()).hexdigest()[:32]


def find_artifacts(uri: str, s3_client: Any) -> list[tuple[str, str]]:
    """(path relative to the prefix, where to fetch it) of each *.tar.gz under `uri`, by name."""
    if uri.startswith("s3://"):
        bucket, _, key = uri[len("s3://") :].partition("/")
        if not bucket:
            raise MmeDataProblem(f"--model-data {uri} names no bucket")
        if key.endswith(ARTIFACT_SUFFIX):
            return [(key.rsplit("/", 1)[-1], key)]
        prefix = key if not key or key.endswith("/") else key + "/"
        found: list[tuple[str, str]] = []
        try:
            for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    if item["Key"].endswith(ARTIFACT_SUFFIX):
                        found.append((item["Key"][len(prefix) :], item["Key"]))
        except Exception as exc:  # noqa: BLE001 - botocore's errors: any of them means no listing
            raise MmeDataProblem(f"could not list s3://{bucket}/{prefix}: {exc}") from exc
        return sorted(found)
    path = Path(uri[len("file://") :] if uri.startswith("file://") else uri)
    if path.is_file():
        return [(path.name, str(path))]
    if not path.is_dir():
        raise MmeDataProblem(f"--model-data {uri}: there is no such file or folder")
    return sorted((p.relative_to(path).as_posix(), str(p)) for p in path.rglob(f"*{ARTIFACT_SUFFIX}"))


def prepare(
    uri: str, root: Path, s3_client_factory: Any, limits: ArchiveLimits | None = None
) -> MmeArtifacts:
    """Fetch and extract the first MAX_ARTIFACTS artifacts under `uri` into root/{model_name}/model
    (`root`: a folder of this run's own, made afresh; removed again if anything fails)."""
    client = s3_client_factory() if uri.startswith("s3://") else None
    found = find_artifacts(uri, client)
    if not found:
        raise MmeDataProblem(
            f"--model-data {uri} holds no *{ARTIFACT_SUFFIX} artifact: a multi-model endpoint's ModelDataUrl "
            f"is an S3 prefix of model.tar.gz files (one per model)"
        )
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    os.chmod(root, 0o755)  # the mount's own folder: readable by a server that does not run as root
    try:
        return MmeArtifacts(root, _extract_all(uri, root, client, found, limits), len(found))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _extract_all(
    uri: str, root: Path, client: Any, found: list[tuple[str, str]], limits: ArchiveLimits | None
) -> tuple[MmeModel, ...]:
    models = []
    for relative, where in found[:MAX_ARTIFACTS]:
        name = model_name(relative)
        dest = root / name / "model"
        dest.mkdir(parents=True)
        os.chmod(dest.parent, 0o755)
        archive = Path(where)
        download: Path | None = None
        if client is not None:
            bucket = uri[len("s3://") :].partition("/")[0]
            fd, tmp = tempfile.mkstemp(prefix="mme-", suffix=ARTIFACT_SUFFIX, dir=root.parent)
            os.close(fd)
            download = archive = Path(tmp)
            try:
                client.download_file(bucket, where, tmp)
            except Exception as exc:  # noqa: BLE001 - botocore's errors
                download.unlink(missing_ok=True)
                raise MmeDataProblem(f"could not download s3://{bucket}/{where}: {exc}") from exc
        try:
            extract_archive(archive, dest, limits)
        except ArchiveRejected as exc:
            raise MmeDataProblem(
                f"the artifact {relative} cannot be extracted as SageMaker extracts it: {exc.detail}. "
                f"Package each model as a gzipped tar with its files at the root "
                f"(tar -czf {relative.rsplit('/', 1)[-1]} -C model_dir .)"
            ) from exc
        finally:
            if download is not None:
                download.unlink(missing_ok=True)
        models.append(MmeModel(name, relative, dest))
    return tuple(models)


def layout_copy(artifacts: MmeArtifacts, model: MmeModel, copy: int) -> MmeModel:
    """The same artifact under another model_name (its files hard-linked; copied across devices)."""
    name = model_name(model.target_model, copy)
    dest = artifacts.root / name / "model"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(dest.parent, 0o755)
        shutil.copytree(model.host_dir, dest, symlinks=True, copy_function=_link_or_copy)
    return MmeModel(name, model.target_model, dest)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
