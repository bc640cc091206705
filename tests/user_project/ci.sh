#!/usr/bin/env bash
# This project's CI, as commands: pack the model, build the image, gate it with `smlocal check`, then
# run the project's own tests against a local SageMaker endpoint (smlocal's pytest fixtures).
# docs/ci.md's GitHub Actions workflow, GitLab CI job and tox environment run these same lines
# (tests/unit/test_ci_recipe.py fails when they drift); smlocal and pytest are installed first.
# Needs a running Docker engine whose published ports this machine reaches on 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export IMAGE="${IMAGE:-my-model:ci}"
export BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}"

tar -czf model.tar.gz -C model .
docker build --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$IMAGE" .
smlocal check "$IMAGE" --model-data model.tar.gz --payload tests/payload.json --junit smlocal-check.xml
python3 -m pytest --junitxml=pytest-report.xml
