"""mme.*: the multi-model container API (hosting contract §5), for images labelled
`com.amazonaws.sagemaker.capabilities.multi-models=true` (SKIPPED with a note otherwise, starting nothing).

The checks share ONE container per run, started as SageMaker starts a multi-model container: `serve`,
SAGEMAKER_MULTI_MODEL=true, the --model-data artifacts extracted (contract_tests.multi_model) into a host
folder mounted read-only at /opt/ml/models, each at {model_name}/model with an opaque model_name. What
the checks loaded and unloaded is tracked (_Run.loaded), and each check first brings the container to the
state it needs through calls other checks verify (a load confirmed by GET /models/{name}); when that
fails it SKIPS, pointing to the check of that call, so that one broken rule fails one check. Without
--model-data only mme.healthy and mme.get-missing run (an arbitrary image cannot load an empty folder).

Time limits: a load gets the startup limit (loading is a model's start), every other call the
invocation limit.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from typing import Any

import httpx

from contract_tests.multi_model import (
    MODELS_ROOT,
    MmeArtifacts,
    MmeDataProblem,
    MmeModel,
    layout_copy,
    model_name,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import MODEL_DATA_CHECK, CheckContext, RunningContainer, Startup, Target
from emulator.errors import EngineError
from emulator.model.containers import MULTI_MODELS_LABEL
from emulator.model.messages import missing_multi_models_label

TARGET_HEADER = "X-Amzn-SageMaker-Target-Model"
#: The environment SageMaker gives a multi-model container.
MME_ENV = {"SAGEMAKER_MULTI_MODEL": "true"}
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


def _require_label(ctx: CheckContext) -> None:
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


def _artifacts(ctx: CheckContext) -> MmeArtifacts:
    """The prepared models; CheckSkipped without --model-data, or when it cannot be used."""
    got = ctx.target.mme_artifacts
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


def _run(ctx: CheckContext) -> _Run:
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


def _container(ctx: CheckContext) -> tuple[_Run, RunningContainer]:
    """The multi-model container, healthy; CheckSkipped (to mme.healthy) when it is not."""
    run = _run(ctx)
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
        with httpx.Client(base_url=container.base_url, timeout=timeout) as client:
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


def _entry(reply: Reply) -> dict[str, Any] | None:
    """The model entry of a GET /models/{name} answer: its JSON object, or the one object of a JSON list
    (TorchServe's describe answers a list of versions; mme.load warns about it)."""
    body = reply.json()
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    return body if isinstance(body, dict) else None


def _entry_problem(reply: Reply, model: MmeModel) -> str | None:
    """Why a GET /models/{name} reply does not show `model` loaded (None: it does)."""
    if reply.status != 200:
        return reply.describe()
    entry = _entry(reply)
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
        problem = _entry_problem(get(ctx, container, model.name), model)
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


def _logs(container: RunningContainer) -> str:
    tail = container.log_tail(10)
    return (
        "Last log lines:\n" + "\n".join(f"    {ln}" for ln in tail.splitlines()) if tail else "No log lines."
    )


def _unknown_name(what: str) -> str:
    """A model_name the container was never asked to load."""
    return model_name(f"never-loaded-{what}")


# ------------------------------------------------------------------------------------------- checks


@check(
    "mme.healthy",
    "Starts as a multi-model container and answers /ping",
    "SageMaker starts a multi-model container with `serve`, SAGEMAKER_MULTI_MODEL=true and no model "
    "loaded; the models arrive later, extracted under /opt/ml/models (read-only for the container), through "
    "POST /models (hosting contract §5). The container must become healthy (GET /ping 200) within the "
    "startup limit like any other.",
    fix="Start the model server without a model when SAGEMAKER_MULTI_MODEL=true and answer /ping at once; "
    "write caches under /tmp, never under /opt/ml/models or /opt/ml/model.",
    before="""
        # at start, whatever SAGEMAKER_MULTI_MODEL says:
        model = load(os.path.join("/opt/ml/model", "model.pt"))
    """,
    after="""
        if os.environ.get("SAGEMAKER_MULTI_MODEL") == "true":
            models = {}  # filled by POST /models
        else:
            model = load(os.path.join("/opt/ml/model", "model.pt"))
    """,
)
def healthy(ctx: CheckContext) -> str:
    _require_label(ctx)
    run = _run(ctx)
    given = "SAGEMAKER_MULTI_MODEL=true and /opt/ml/models mounted read-only"
    if run.start_error is not None:
        if ctx.target.startup().start_error is not None:
            raise CheckSkipped("Docker could not start the container; see start.no-exit")
        raise CheckFailed(f"started with {given}, Docker could not start the container: {run.start_error}")
    assert run.startup is not None and run.container is not None
    startup = run.startup
    ctx.evidence.update(
        environment=MME_ENV, exited=startup.exited, exit_code=startup.exit_code, elapsed_s=startup.elapsed_s
    )
    if startup.healthy:
        return f"started with {given}: GET /ping answered 200 after {startup.first_healthy_s:.2f} s"
    shared = ctx.target.startup()  # the same image started as a single-model container
    if not shared.healthy:
        raise CheckSkipped(
            f"the container never became healthy ({shared.last_observation}); see start.healthy"
        )
    how = (
        f"exited with code {startup.exit_code}"
        if startup.exited
        else f"gave no GET /ping 200 within {ctx.config.limits.startup_timeout_s:g} s "
        f"(last: {startup.last_observation})"
    )
    hint = ""
    if "read-only file system" in startup.all_logs.lower():
        hint = " The log says it wrote to a read-only file system: /opt/ml/models is read-only."
    raise CheckFailed(
        f"started with {given}, the container {how}, while started as a single-model container it became "
        f"healthy (start.healthy).{hint} {_logs(run.container)}\nStart the server without loading a model "
        f"when SAGEMAKER_MULTI_MODEL=true; models come through POST /models."
    )


@check(
    "mme.load",
    "POST /models loads a model, and GET /models/{name} then shows it",
    'SageMaker loads a model with POST /models {"model_name": NAME, "url": '
    f'"{MODELS_ROOT}/NAME/model"}} (NAME is an opaque id, the folder read-only) and expects a 2xx once the '
    'model is loaded; GET /models/{name} then answers {"modelName", "modelUrl"} (hosting contract §5). '
    "The check loads each --model-data artifact (two at most) under the startup limit.",
    fix="Load the model from the `url` folder of the request (not from /opt/ml/model, not from a path "
    "derived from the name), answer 2xx only once it is loaded, and answer GET /models/{name} with "
    '{"modelName": name, "modelUrl": url}. ' + API_FIX,
    before="""
        @app.post("/models")
        def load():
            threading.Thread(target=load_later, args=(request.json,)).start()
            return {"status": "ok"}  # answered before the model is there
    """,
    after="""
        @app.post("/models")
        def load():
            body = request.json
            models[body["model_name"]] = load_model(body["url"])  # loaded when it answers
            return {"status": f"Model {body['model_name']} loaded"}
    """,
)
def load_models(ctx: CheckContext) -> str:
    _require_label(ctx)
    artifacts = _artifacts(ctx)
    run, container = _container(ctx)
    done = []
    for model in artifacts.models:
        reply = load(ctx, container, model)
        ctx.evidence[f"load {model.target_model}"] = {"model_name": model.name, "status": reply.status}
        if not reply.ok:
            run.load_failed[model.target_model] = reply.describe()
            hint = ""
            if "read-only" in (reply.excerpt() + container.log_tail(20)).lower():
                hint = f" It mentions a read-only file system: {MODELS_ROOT} is read-only; write under /tmp."
            raise CheckFailed(
                f'loading {model.target_model} (POST /models {{"model_name": "{model.name}", "url": '
                f'"{model.url}"}}): {reply.describe()}.{hint} {_logs(container)}\nSageMaker expects a 2xx '
                f"once the model is loaded (507 only when there is no room)."
            )
        got = get(ctx, container, model.name)
        problem = _entry_problem(got, model)
        if problem is not None:
            run.load_failed[model.target_model] = problem
            raise CheckFailed(
                f"POST /models answered HTTP {reply.status} to loading {model.target_model} as {model.name}, "
                f"but then {problem}: the model is not loaded. Answer the load only once the model is "
                f'loaded, and GET /models/{{name}} with {{"modelName": name, "modelUrl": url}}.'
            )
        if isinstance(got.json(), list):
            ctx.warn(
                f"GET /models/{model.name} answers a JSON list holding the model's entry; SageMaker's "
                f'contract says an object {{"modelName": ..., "modelUrl": ...}}'
            )
        entry = _entry(got) or {}
        if entry.get("modelUrl") != model.url:
            ctx.warn(f"GET /models/{model.name} says modelUrl {entry.get('modelUrl')!r}, not {model.url!r}")
        run.loaded[model.name] = model
        done.append(model.target_model)
    more = f" (the first {len(done)} of {artifacts.found})" if artifacts.found > len(done) else ""
    where = f"{MODELS_ROOT}/{{model_name}}/model"
    return f"loaded {', '.join(done)}{more} from {where}; GET /models/{{name}} shows each"


@check(
    "mme.duplicate-load",
    "Loading a model that is loaded already answers 409",
    "POST /models for a model_name that is loaded already must answer 409 Conflict (hosting contract §5): "
    "SageMaker tells 'loaded already' from a fresh load by it.",
    fix="Answer 409 to a load of a model_name that is loaded (or loading), and keep the loaded model. "
    + API_FIX,
    before="""
        models[name] = load_model(url)  # a second load replaces the first, answers 200
    """,
    after="""
        if name in models:
            return {"error": f"{name} is already loaded"}, 409
        models[name] = load_model(url)
    """,
)
def duplicate_load(ctx: CheckContext) -> str:
    _require_label(ctx)
    model = _artifacts(ctx).models[0]
    run, container = _container(ctx)
    ensure_loaded(ctx, run, container, model)
    reply = load(ctx, container, model)
    ctx.evidence.update(model_name=model.name, status=reply.status)
    if reply.status != 409:
        raise CheckFailed(
            f"{model.target_model} was loaded as {model.name}; loading it again, {reply.describe()}. "
            f"SageMaker expects 409 for a model that is loaded already. Answer 409, and keep the loaded "
            f"model."
        )
    return f"a second POST /models for {model.name} answered 409"


@check(
    "mme.get-missing",
    "GET /models/{name} of a model not loaded answers 404",
    "GET /models/{model_name} answers 404 when that model is not loaded (hosting contract §5): SageMaker "
    "asks before it loads or invokes.",
    fix="Answer GET /models/{name} with 404 for a name that is not loaded (not 200 with an empty body, not "
    "500). " + API_FIX,
    before="""
        @app.get("/models/<name>")
        def describe(name):
            return models[name].info()  # KeyError: 500 for a model not loaded
    """,
    after="""
        @app.get("/models/<name>")
        def describe(name):
            if name not in models:
                return {"error": f"{name} is not loaded"}, 404
            return {"modelName": name, "modelUrl": models[name].url}
    """,
)
def get_missing(ctx: CheckContext) -> str:
    _require_label(ctx)
    _, container = _container(ctx)
    name = _unknown_name("get")
    reply = get(ctx, container, name)
    ctx.evidence.update(model_name=name, status=reply.status)
    if reply.status != 404:
        raise CheckFailed(
            f"no model {name} was ever loaded, yet {reply.describe()}. SageMaker expects 404 for a model "
            f"that is not loaded. Answer 404."
        )
    return f"GET /models/{name} (never loaded) answered 404"


@check(
    "mme.list",
    "GET /models lists the loaded models, page by page",
    'GET /models answers {"models": [{"modelName", "modelUrl"}, ...], "nextPageToken": "..."}; a client '
    "passes the token back as ?next_page_token= for the next page, and a page without nextPageToken is the "
    f"last (hosting contract §5). The check loads {LIST_MODELS} models (the artifacts under more names if "
    "need be), follows every token, and expects each loaded model listed exactly once.",
    fix='Answer GET /models with {"models": [{"modelName": ..., "modelUrl": ...}]}, read next_page_token '
    "to return the page after it, and leave nextPageToken out of the last page. " + API_FIX,
    before="""
        @app.get("/models")
        def list_models():
            page = names[:limit]  # next_page_token ignored: always the first page
            return {"models": page, "nextPageToken": str(limit)}
    """,
    after="""
        @app.get("/models")
        def list_models():
            start = int(request.args.get("next_page_token", 0))
            page = names[start : start + limit]
            out = {"models": [{"modelName": n, "modelUrl": urls[n]} for n in page]}
            if start + limit < len(names):
                out["nextPageToken"] = str(start + limit)
            return out
    """,
)
def list_models(ctx: CheckContext) -> str:
    _require_label(ctx)
    artifacts = _artifacts(ctx)
    run, container = _container(ctx)
    wanted = list(artifacts.models)
    copy = 1
    while len(wanted) < LIST_MODELS:
        wanted.append(layout_copy(artifacts, artifacts.models[(copy - 1) % len(artifacts.models)], copy))
        copy += 1
    listed_models: list[MmeModel] = []
    for model in wanted:
        try:
            ensure_loaded(ctx, run, container, model)
        except CheckSkipped:
            if model is wanted[0]:
                raise
            ctx.warn(f"listed {len(listed_models)} models: loading one more did not succeed")
            break
        listed_models.append(model)
    listing = list_all(ctx, container)
    ctx.evidence.update(pages=listing.pages, listed=[e.get("modelName") for e in listing.entries])
    if listing.problem is not None:
        raise CheckFailed(f"with {len(run.loaded)} models loaded, GET /models: {listing.problem}. " + API_FIX)
    names = [e["modelName"] for e in listing.entries]
    for model in run.loaded.values():
        count = names.count(model.name)
        if count != 1:
            raise CheckFailed(
                f"{model.name} is loaded (GET /models/{model.name} shows it) but the {listing.pages} page(s) "
                f"of GET /models list it {count} times, not once: {names}. List every loaded model exactly "
                f"once across the pages."
            )
        url = next(e["modelUrl"] for e in listing.entries if e["modelName"] == model.name)
        if url != model.url:
            ctx.warn(f"GET /models says modelUrl {url!r} for {model.name}, not {model.url!r}")
    paging = "one page" if listing.pages == 1 else f"{listing.pages} pages, through nextPageToken"
    return f"{len(run.loaded)} loaded models listed once each in {paging}"


@check(
    "mme.invoke",
    "POST /models/{name}/invoke serves a loaded model, and answers 404 for one not loaded",
    "SageMaker sends an InvokeEndpoint with TargetModel to POST /models/{model_name}/invoke with the "
    "request's Content-Type, Accept and X-Amzn-SageMaker-Target-Model (the artifact's path); a loaded "
    "model answers, and a model that is not loaded answers 404 (hosting contract §5), which makes "
    "SageMaker load it. The check sends the configured payload to each loaded artifact.",
    fix="Route POST /models/{name}/invoke to that model; answer 404 when it is not loaded (never another "
    "model's answer, never a 200). " + API_FIX,
    before="""
        @app.post("/models/<name>/invoke")
        def invoke(name):
            return the_model.predict(request.data)  # whatever the name
    """,
    after="""
        @app.post("/models/<name>/invoke")
        def invoke(name):
            if name not in models:
                return {"error": f"{name} is not loaded"}, 404
            return models[name].predict(request.data)
    """,
)
def invoke(ctx: CheckContext) -> str:
    _require_label(ctx)
    artifacts = _artifacts(ctx)
    run, container = _container(ctx)
    headers = {"Content-Type": ctx.config.content_type}
    if ctx.config.accept:
        headers["Accept"] = ctx.config.accept
    served = []
    for model in artifacts.models:
        ensure_loaded(ctx, run, container, model)
        reply = call(
            ctx,
            container,
            "POST",
            f"/models/{model.name}/invoke",
            content=ctx.config.payload,
            headers={**headers, TARGET_HEADER: model.target_model},
        )
        ctx.evidence[f"invoke {model.target_model}"] = reply.status
        if not reply.ok:
            bad = (
                reply.status is None or reply.status == 404 or reply.status >= 500 or ctx.config.payload_given
            )
            if bad:
                raise CheckFailed(
                    f"{model.target_model} is loaded as {model.name} (GET /models/{model.name} shows "
                    f"it), yet {reply.describe()} to {ctx.config.payloads[0].source}. "
                    f"{_logs(container)}\nServe a loaded model on POST /models/{{name}}/invoke (404 means "
                    f"'not loaded' to SageMaker)."
                )
            ctx.warn(
                f"{model.target_model} answered HTTP {reply.status} to {ctx.config.payloads[0].source}: pass "
                f"--payload with an input the models accept to see them answer"
            )
        served.append(f"{model.target_model} HTTP {reply.status}")
    name = _unknown_name("invoke")
    reply = call(
        ctx, container, "POST", f"/models/{name}/invoke", content=ctx.config.payload, headers=headers
    )
    ctx.evidence["invoke never-loaded"] = reply.status
    if reply.status != 404:
        raise CheckFailed(
            f"no model {name} was ever loaded, yet {reply.describe()}. SageMaker expects 404 for a model "
            f"that is not loaded (it then loads the model and retries); an answer for it serves the wrong "
            f"model. Answer 404."
        )
    return f"{', '.join(served)}; a model not loaded: 404"


def _gone_problem(ctx: CheckContext, container: RunningContainer, model: MmeModel) -> str | None:
    """Why `model` still looks loaded after its unload (None: gone from GET and, if it works, the list)."""
    reply = get(ctx, container, model.name)
    if reply.status != 404:
        if _entry_problem(reply, model) is None:
            return f"GET /models/{model.name} still shows it ({reply.describe()})"
        control = get(ctx, container, _unknown_name("unload"))
        if control.status != reply.status:
            return f"{reply.describe()}, not 404"
        ctx.warn("GET /models/{name} answers no 404 for any model (see mme.get-missing): not used here")
    listing = list_all(ctx, container)
    if listing.problem is not None:
        ctx.warn(f"GET /models not used here: its paging is broken (see mme.list): {listing.problem}")
    elif any(e["modelName"] == model.name for e in listing.entries):
        return "GET /models still lists it"
    return None


@check(
    "mme.unload",
    "DELETE /models/{name} unloads the model, and answers 404 for one not loaded",
    "DELETE /models/{model_name} unloads the model and frees its resources before it answers (SageMaker "
    "unloads unused models to make room for others), and answers 404 for a model that is not loaded "
    "(hosting contract §5). The check unloads a model, expects it gone from GET /models/{name} and from "
    "GET /models, then unloads it again.",
    fix="Unload and free the model before answering DELETE with 200; answer 404 when it is not loaded. "
    + API_FIX,
    before="""
        @app.delete("/models/<name>")
        def unload(name):
            return {"status": "unloaded"}  # the model stays in memory
    """,
    after="""
        @app.delete("/models/<name>")
        def unload(name):
            if name not in models:
                return {"error": f"{name} is not loaded"}, 404
            models.pop(name).release()  # freed before the answer
            return {"status": f"Model {name} unloaded"}
    """,
)
def unload(ctx: CheckContext) -> str:
    _require_label(ctx)
    artifacts = _artifacts(ctx)
    run, container = _container(ctx)
    model = layout_copy(artifacts, artifacts.models[0], UNLOAD_COPY)
    try:
        ensure_loaded(ctx, run, container, model)
    except CheckSkipped:
        if not run.loaded:
            raise
        model = list(run.loaded.values())[-1]  # no room for one of its own: unload the last one loaded
    reply = call(ctx, container, "DELETE", f"/models/{model.name}")
    ctx.evidence.update(model_name=model.name, status=reply.status)
    if not reply.ok:
        raise CheckFailed(
            f"{model.name} is loaded (GET /models/{model.name} shows it), yet unloading it, "
            f"{reply.describe()}. "
            f"{_logs(container)}\nSageMaker expects a 2xx once the model is unloaded and its memory freed."
        )
    run.loaded.pop(model.name, None)
    problem = _gone_problem(ctx, container, model)
    if problem is not None:
        raise CheckFailed(
            f"DELETE /models/{model.name} answered HTTP {reply.status}, but then {problem}: the model is "
            f"still loaded. SageMaker unloads models to free memory for others; unload and free it before "
            f"answering."
        )
    again = call(ctx, container, "DELETE", f"/models/{model.name}")
    ctx.evidence["second_status"] = again.status
    if again.status != 404:
        raise CheckFailed(
            f"{model.name} was unloaded; unloading it again, {again.describe()}. SageMaker expects 404 for a "
            f"model that is not loaded. Answer 404."
        )
    return (
        f"DELETE /models/{model.name} answered HTTP {reply.status}, the model is gone; a second DELETE: 404"
    )


@check(
    "mme.reload",
    "A model unloaded can be loaded again",
    "SageMaker evicts models it may need again: an unloaded model_name comes back in a later POST /models "
    "(after an eviction, the next request for that model), which must load it as the first time did "
    "(hosting contract §5).",
    fix="Forget everything about a model when it is unloaded (its name included), so that a later load of "
    "the same model_name loads it afresh. " + API_FIX,
    before="""
        seen = set()  # names ever loaded
        if name in seen:
            return {"error": "already loaded"}, 409
    """,
    after="""
        if name in models:  # only the ones loaded now
            return {"error": "already loaded"}, 409
    """,
)
def reload(ctx: CheckContext) -> str:
    _require_label(ctx)
    artifacts = _artifacts(ctx)
    run, container = _container(ctx)
    model = layout_copy(artifacts, artifacts.models[0], RELOAD_COPY)
    try:
        ensure_loaded(ctx, run, container, model)
    except CheckSkipped:
        if not run.loaded:
            raise
        model = list(run.loaded.values())[-1]
    reply = call(ctx, container, "DELETE", f"/models/{model.name}")
    if not reply.ok:
        raise CheckSkipped(f"unloading {model.name} failed ({reply.describe()}); see mme.unload")
    run.loaded.pop(model.name, None)
    if _gone_problem(ctx, container, model) is not None:
        raise CheckSkipped(f"{model.name} is still loaded after DELETE; see mme.unload")
    again = load(ctx, container, model)
    ctx.evidence.update(model_name=model.name, status=again.status)
    problem = None if again.ok else again.describe()
    if problem is None:
        problem = _entry_problem(get(ctx, container, model.name), model)
    if problem is not None:
        raise CheckFailed(
            f"{model.name} was loaded, then unloaded (DELETE answered HTTP {reply.status}, GET /models/"
            f"{model.name} 404); loading it again: {problem}. SageMaker loads an evicted model again under "
            f"the same model_name: forget a model entirely when it is unloaded."
        )
    run.loaded[model.name] = model
    return f"{model.name} loaded, unloaded and loaded again"
