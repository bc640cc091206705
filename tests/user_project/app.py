"""A small linear model served the SageMaker way: GET /ping and POST /invocations on port 8080.

The model artifact is /opt/ml/model/model.json ({"weights": [...], "bias": b}), extracted there by
SageMaker (or smlocal) from the model.tar.gz given as ModelDataUrl. The model is loaded when the
worker starts, so an artifact that cannot be loaded stops the container instead of answering errors
behind a healthy /ping.

    POST /invocations  Content-Type: application/json  {"instances": [[x1, x2, x3], ...]}
    -> 200 application/json {"predictions": [y, ...]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from flask import Flask, Response, request

MODEL_DIR = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))


def load_model(model_dir: Path) -> tuple[list[float], float]:
    """The weights and bias of model.json; raises on an artifact that is missing or malformed."""
    spec = json.loads((model_dir / "model.json").read_text())
    weights = [float(w) for w in spec["weights"]]
    if not weights:
        raise ValueError("model.json: weights is empty")
    return weights, float(spec["bias"])


WEIGHTS, BIAS = load_model(MODEL_DIR)
app = Flask(__name__)


def _json(status: int, body: object) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


@app.get("/ping")
def ping() -> Response:
    return Response(b"", status=200)


@app.post("/invocations")
def invocations() -> Response:
    if request.mimetype != "application/json":
        return _json(
            415, {"error": f"unsupported Content-Type {request.content_type!r}; send application/json"}
        )
    # No Accept header (boto3 sends none when Accept is not given) takes the default: JSON.
    if request.accept_mimetypes and not request.accept_mimetypes.accept_json:
        return _json(406, {"error": "this model answers application/json only"})
    try:
        instances = json.loads(request.get_data())["instances"]
        rows = [[float(x) for x in row] for row in instances]
    except (ValueError, KeyError, TypeError) as exc:
        return _json(400, {"error": f'expected {{"instances": [[number, ...], ...]}}: {exc}'})
    if any(len(row) != len(WEIGHTS) for row in rows):
        return _json(400, {"error": f"each instance needs {len(WEIGHTS)} features"})
    predictions = [sum(w * x for w, x in zip(WEIGHTS, row, strict=True)) + BIAS for row in rows]
    return _json(200, {"predictions": predictions})
