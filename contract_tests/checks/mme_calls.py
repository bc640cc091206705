"""What the mme.* checks (checks/mme.py) share per run: the one multi-model container, what it was
asked to load, and the container-API calls (a load, a get, a listing followed page by page) whose
answers the checks judge."""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from typing import Any

import httpx

from contract_tests.http_client import container_client
from contract_tests.multi_model import (
    MULTI_MODEL_ENV,
    MULTI_MODEL_OPTION,
    MmeArtifacts,
    MmeDataProblem,
    MmeModel,
    model_name,
)
from contract_tests.result import CheckSkipped
from contract_tests.running import RunningContainer, Startup
from contract_tests.target import MODEL_DATA_CHECK, CheckContext, Target
from emulator.errors import EngineError
from emulator.model.containers import MULTI_MODELS_LABEL
from emulator.model.messages import missing_multi_models_label

TARGET_HEADER = "X-Amzn-SageMaker-Target-Model"
#: The environment SageMaker gives a multi-model container.
MME_ENV = {MULTI_MODEL_ENV: "true"}
#: mme.list loads this many models (copies of the artifacts under more names), so that a server that
#: pages in twos shows its paging; a 507 stops it earlier.
LIST_MODELS = 3
#: mme.list follows nextPageToken this many times at most (then: the paging never ends).
MAX_PAGES = 50
#: Characters of a body quoted in messages.
EXCERPT = 200
#: The copy number of the model mme.reload unloads and loads again (its own model_name).
RELOAD_COPY = 90
#: ... and mme.unload's.
UNLOAD_COPY = 91

API_FIX = (
    "Implement SageMaker's multi-model container API (the 'Custom containers contract for multi-model "
    "endpoints'): POST /models loads {model_name, url} (409 if loaded, 507 without room), GET /models lists "
    "{models: [{modelName, modelUrl}], nextPageToken?} page by page (next_page_token), GET /models/{name} "
    "answers {modelName, modelUrl} or 404, DELETE /models/{name} frees it (404 if not loaded), POST "
    "/models/{name}/invoke serves it (404 if not loaded). Multi Model Server (the SageMaker inference "
    "toolkit) and TorchServe implement it."
)


@dataclass(frozen=True)
class Reply:
    """One call of the container API: its HTTP answer, or why there was none."""

    method: str
    path: str
    status: int | None
    body: bytes = b""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def excerpt(self) -> str:
        text = self.body[:EXCERPT].decode("utf-8", "replace").strip()
        return text + ("…" if len(self.body) > EXCERPT else "") if text else "(empty body)"

    def describe(self) -> str:
        if self.status is None:
            return f"{self.method} {self.path} got no answer ({self.error})"
        return f"{self.method} {self.path} answered HTTP {self.status}: {self.excerpt()}"


@dataclass
class _Run:
    container: RunningContainer | None = None
    startup: Startup | None = None
    start_error: str | None = None
    #: models this run loaded (confirmed by GET) and has not unloaded
    loaded: dict[str, MmeModel] = field(default_factory=dict)
    #: mme.load's own verdict on a model, once given: why it could not be loaded (None: it was)
    load_failed: dict[str, str] = field(default_factory=dict)


_RUNS: weakref.WeakKeyDictionary[Target, _Run] = weakref.WeakKeyDictionary()


def require_label(ctx: CheckContext) -> None:
    value = ctx.target.image.labels.get(MULTI_MODELS_LABEL)
    ctx.evidence["label"] = value
    if value != "true":
        if value is not None:
            ctx.warn(f"the label {MULTI_MODELS_LABEL} is {value!r}, not 'true' (smlocal counts only 'true')")
        refusal = missing_multi_models_label(ctx.config.image)
        raise CheckSkipped(
            f"the image has no label {MULTI_MODELS_LABEL}=true, so it cannot serve a multi-model endpoint: "
            f'SageMaker fails a multi-model endpoint of it with "{refusal}" (single-model endpoints need no '
            f"label). "
            f"To serve many models, implement the multi-model container API and add "
            f"`LABEL {MULTI_MODELS_LABEL}=true`; the mme.* checks then verify it."
        )


def artifacts_of(ctx: CheckContext) -> MmeArtifacts:
    """The prepared models; CheckSkipped without --model-data, or when it cannot be used."""
    got = ctx.target.mme_artifacts
    if got is None and ctx.config.model_data:  # a model folder: single-model data only
        raise CheckSkipped(
            f"no multi-model data: --model-data {ctx.config.model_data} holds no *.tar.gz, so it is the "
            f"single-model data only. Give a prefix (or a local folder) of model.tar.gz files with "
            f"{MULTI_MODEL_OPTION} to run this check"
        )
    if got is None:
        raise CheckSkipped(
            "no --model-data given: a multi-model container loads models from /opt/ml/models, and an "
            "arbitrary image cannot load an empty folder. Pass --model-data with an S3 prefix or a local "
            "folder of *.tar.gz model artifacts (smlocal check IMAGE --model-data s3://bucket/models/) "
            "to run this check"
        )
    if isinstance(got, MmeDataProblem):
        raise CheckSkipped(f"the model data cannot be used ({got.message}); see {MODEL_DATA_CHECK}")
    return got


def run_of(ctx: CheckContext) -> _Run:
    """The run's multi-model container, started once."""
    target = ctx.target
    run = _RUNS.get(target)
    if run is None:
        run = _RUNS[target] = _Run()
        got = target.mme_artifacts
        if isinstance(got, MmeArtifacts):
            root = got.root
        else:
            root = ctx.config.cache_dir / "mme-empty"
            root.mkdir(parents=True, exist_ok=True)
        try:
            run.container = target.start(MME_ENV, models_dir=root)
        except EngineError as exc:
            run.start_error = exc.message
        else:
            run.startup = run.container.wait_startup()
    return run


def container_of(ctx: CheckContext) -> tuple[_Run, RunningContainer]:
    """The multi-model container, healthy; CheckSkipped (to mme.healthy) when it is not."""
    run = run_of(ctx)
    if run.container is None or run.startup is None or not run.startup.healthy:
        raise CheckSkipped("the multi-model container never became healthy; see mme.healthy")
    return run, run.container


def call(
    ctx: CheckContext,
    container: RunningContainer,
    method: str,
    path: str,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> Reply:
    """One call of the container API (JSON `body` unless `content`)."""
    request_headers = {"Accept": "application/json"}
    if body is not None:
        content = json.dumps(body).encode()
        request_headers["Content-Type"] = "application/json"
    request_headers.update(headers or {})
    timeout = timeout_s or ctx.config.limits.invocation_timeout_s
    try:
        with container_client(base_url=container.base_url, timeout=timeout) as client:
            r = client.request(method, path, content=content, headers=request_headers)
            return Reply(method, path, r.status_code, r.content)
    except httpx.TimeoutException:
        return Reply(method, path, None, error=f"no answer within {timeout:g} s")
    except httpx.HTTPError as exc:
        return Reply(method, path, None, error=f"{type(exc).__name__}: {exc}")


def load(ctx: CheckContext, container: RunningContainer, model: MmeModel) -> Reply:
    return call(
        ctx,
        container,
        "POST",
        "/models",
        {"model_name": model.name, "url": model.url},
        timeout_s=ctx.config.limits.startup_timeout_s,
    )


def get(ctx: CheckContext, container: RunningContainer, name: str) -> Reply:
    return call(ctx, container, "GET", f"/models/{name}")


def entry_of(reply: Reply) -> dict[str, Any] | None:
    """The model entry of a GET /models/{name} answer: its JSON object, or the one object of a JSON list
    (TorchServe's describe answers a list of versions; mme.load warns about it)."""
    body = reply.json()
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    return body if isinstance(body, dict) else None


def entry_problem(reply: Reply, model: MmeModel) -> str | None:
    """Why a GET /models/{name} reply does not show `model` loaded (None: it does)."""
    if reply.status != 200:
        return reply.describe()
    entry = entry_of(reply)
    if entry is None or entry.get("modelName") != model.name:
        return f'{reply.describe()} (expected a JSON object with "modelName": "{model.name}")'
    return None


def ensure_loaded(ctx: CheckContext, run: _Run, container: RunningContainer, model: MmeModel) -> None:
    """Load `model` unless this run did; CheckSkipped (to mme.load) when that does not work."""
    if model.name in run.loaded:
        return
    if model.target_model in run.load_failed:
        raise CheckSkipped(f"{model.target_model} could not be loaded; see mme.load")
    reply = load(ctx, container, model)
    if reply.status == 507:
        raise CheckSkipped(
            f"the container has no room for another model (POST /models answered 507 with "
            f"{len(run.loaded)} loaded by this run): not enough memory for this check"
        )
    problem = None if reply.ok else reply.describe()
    if problem is None:
        problem = entry_problem(get(ctx, container, model.name), model)
    if problem is not None:
        raise CheckSkipped(f"loading {model.target_model} as {model.name} failed ({problem}); see mme.load")
    run.loaded[model.name] = model


@dataclass
class Listing:
    """Every page of GET /models, or why the paging is broken."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    pages: int = 0
    problem: str | None = None


def list_all(ctx: CheckContext, container: RunningContainer) -> Listing:
    """GET /models, then each nextPageToken in turn, until a page has none (shape checked on every page)."""
    listing = Listing()
    seen_tokens: set[str] = set()
    token: str | None = None
    while True:
        path = "/models" if token is None else f"/models?{httpx.QueryParams({'next_page_token': token})}"
        reply = call(ctx, container, "GET", path)
        listing.pages += 1
        page = reply.json()
        where = f"page {listing.pages} ({path})"
        if reply.status != 200:
            listing.problem = f"{where}: {reply.describe()}"
            return listing
        if not isinstance(page, dict) or not isinstance(page.get("models"), list):
            listing.problem = f'{where} is not a JSON object with a "models" list: {reply.excerpt()}'
            return listing
        for entry in page["models"]:
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("modelName"), str)
                and isinstance(entry.get("modelUrl"), str)
            ):
                listing.problem = (
                    f'{where} has an entry that is not {{"modelName": ..., "modelUrl": ...}}: '
                    f"{json.dumps(entry)[:EXCERPT]}"
                )
                return listing
            listing.entries.append(entry)
        token = page.get("nextPageToken")
        if token is None:
            return listing
        if not isinstance(token, str) or not token:
            listing.problem = f"{where} has a nextPageToken that is not a non-empty string: {token!r}"
            return listing
        if token in seen_tokens:
            listing.problem = (
                f"{where} gave nextPageToken {token!r} again: the server ignores next_page_token, so a "
                f"client that pages through the list never reaches its end"
            )
            return listing
        seen_tokens.add(token)
        if listing.pages >= MAX_PAGES:
            listing.problem = f"the list did not end within {MAX_PAGES} pages"
            return listing


def logs_of(container: RunningContainer) -> str:
    tail = container.log_tail(10)
    return (
        "Last log lines:\n" + "\n".join(f"    {ln}" for ln in tail.splitlines()) if tail else "No log lines."
    )


def unknown_name(what: str) -> str:
    """A model_name the container was never asked to load."""
    return model_name(f"never-loaded-{what}")
