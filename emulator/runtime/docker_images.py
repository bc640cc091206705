"""Images on the Docker engine, for the Docker adapter (runtime/docker.py, which delegates here): the
local image an image reference names, the image's configuration, and every path in its file system.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Iterator
from typing import Any, cast

import docker.errors

from emulator.errors import EngineError, ImageNotFound
from emulator.runtime.base import ImageConfig, ResolvedImage


def candidate_local_names(image: str) -> list[str]:
    """Local names an image reference may resolve to, best first.

    `123456789012.dkr.ecr.us-east-1.amazonaws.com/repo:tag` -> itself, then `repo:tag`
    (a local image of the same repository and tag); a missing tag means `latest`.
    """
    names = [image]
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        names.append(rest)
    with_tags = []
    for name in names:
        last = name.rsplit("/", 1)[-1]
        if "@" not in name and ":" not in last:
            with_tags.append(f"{name}:latest")
    return names + with_tags


class DockerImages:
    """resolve_image, inspect_image and image_paths of DockerRuntime, over its lazily made client."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        return self._client()

    def resolve_image(self, image: str) -> ResolvedImage:
        for name in candidate_local_names(image):
            try:
                found = self.client.images.get(name)
            except docker.errors.ImageNotFound:
                continue
            except docker.errors.APIError as exc:
                if exc.status_code in (400, 404):  # malformed reference: not ours
                    continue
                raise EngineError(f"Docker engine error while resolving {image}: {exc}") from exc
            repo = name.split("@", 1)[0]
            last = repo.rsplit("/", 1)[-1]
            if ":" in last:
                repo = repo.rsplit(":", 1)[0]
            return ResolvedImage(specified=image, resolved=f"{repo}@{found.id}", image_id=found.id)
        raise ImageNotFound(f"No local image matches {image}")

    def inspect_image(self, image: str) -> ImageConfig:
        resolved = self.resolve_image(image)
        try:
            found = self.client.images.get(resolved.image_id)
        except docker.errors.DockerException as exc:
            raise EngineError(f"Docker engine error while inspecting {image}: {exc}") from exc
        config = found.attrs.get("Config") or {}
        env = dict(item.split("=", 1) for item in config.get("Env") or () if "=" in item)
        return ImageConfig(
            id=found.id,
            entrypoint=tuple(config["Entrypoint"]) if config.get("Entrypoint") else None,
            cmd=tuple(config["Cmd"]) if config.get("Cmd") else None,
            user=config.get("User") or "",
            size_bytes=int(found.attrs.get("Size") or 0),
            labels=dict(config.get("Labels") or {}),
            env=env,
            working_dir=config.get("WorkingDir") or "",
            architecture=str(found.attrs.get("Architecture") or ""),
        )

    def image_paths(self, image: str) -> Iterator[str]:
        resolved = self.resolve_image(image)
        container = self.client.containers.create(
            resolved.image_id,
            command=["serve"],
            labels={"smlocal.managed": "true", "smlocal.role": "inspect"},
        )
        try:
            stream = _ChunkReader(container.export(chunk_size=1 << 20))
            with tarfile.open(fileobj=cast(Any, stream), mode="r|") as archive:
                for member in archive:
                    yield "/" + member.name.removeprefix("./").lstrip("/")
        finally:
            container.remove(force=True)


class _ChunkReader:
    """A file-like object over an iterator of byte chunks, for streaming tar reads."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            try:
                self._buffer += next(self._chunks)
            except StopIteration:
                break
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data
