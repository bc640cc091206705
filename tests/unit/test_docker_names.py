"""emulator.runtime.docker_images.candidate_local_names: how an image reference maps to local names."""

from __future__ import annotations

import pytest

from emulator.runtime.docker_images import candidate_local_names

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (f"{ECR}/repo:tag", [f"{ECR}/repo:tag", "repo:tag"]),
        (f"{ECR}/team/repo:1.2", [f"{ECR}/team/repo:1.2", "team/repo:1.2"]),
        (f"{ECR}/repo", [f"{ECR}/repo", "repo", f"{ECR}/repo:latest", "repo:latest"]),
        ("localhost/repo", ["localhost/repo", "repo", "localhost/repo:latest", "repo:latest"]),
        ("localhost:5000/repo:v1", ["localhost:5000/repo:v1", "repo:v1"]),
        (
            "registry.example.com:5000/ns/repo",
            [
                "registry.example.com:5000/ns/repo",
                "ns/repo",
                "registry.example.com:5000/ns/repo:latest",
                "ns/repo:latest",
            ],
        ),
    ],
)
def test_registry_references(image: str, expected: list[str]) -> None:
    assert candidate_local_names(image) == expected


def test_ecr_uri_is_tried_first_then_the_local_repo_tag() -> None:
    names = candidate_local_names(f"{ECR}/sagemaker-sd:gpu")
    assert names[0] == f"{ECR}/sagemaker-sd:gpu"
    assert names[1] == "sagemaker-sd:gpu"


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (f"{ECR}/repo@{DIGEST}", [f"{ECR}/repo@{DIGEST}", f"repo@{DIGEST}"]),
        (f"repo@{DIGEST}", [f"repo@{DIGEST}"]),
        (f"{ECR}/repo:tag@{DIGEST}", [f"{ECR}/repo:tag@{DIGEST}", f"repo:tag@{DIGEST}"]),
    ],
)
def test_digests_get_no_latest(image: str, expected: list[str]) -> None:
    assert candidate_local_names(image) == expected


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("echo:latest", ["echo:latest"]),
        ("smlocal/echo:1", ["smlocal/echo:1"]),
        ("echo", ["echo", "echo:latest"]),
        ("library/ubuntu", ["library/ubuntu", "library/ubuntu:latest"]),
        ("my-org/my-image:v1.2.3", ["my-org/my-image:v1.2.3"]),
    ],
)
def test_plain_local_tags(image: str, expected: list[str]) -> None:
    assert candidate_local_names(image) == expected
