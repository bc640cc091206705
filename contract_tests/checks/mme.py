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

from contract_tests.checks.mme_calls import (
    API_FIX,
    LIST_MODELS,
    MME_ENV,
    artifacts_of,
    container_of,
    ensure_loaded,
    entry_of,
    entry_problem,
    get,
    list_all,
    load,
    logs_of,
    require_label,
    run_of,
    unknown_name,
)
from contract_tests.multi_model import (
    MODELS_ROOT,
    MmeModel,
    layout_copy,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

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
    require_label(ctx)
    run = run_of(ctx)
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
        f"healthy (start.healthy).{hint} {logs_of(run.container)}\nStart the server without loading a model "
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
    require_label(ctx)
    artifacts = artifacts_of(ctx)
    run, container = container_of(ctx)
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
                f'"{model.url}"}}): {reply.describe()}.{hint} {logs_of(container)}\nSageMaker expects a 2xx '
                f"once the model is loaded (507 only when there is no room)."
            )
        got = get(ctx, container, model.name)
        problem = entry_problem(got, model)
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
        entry = entry_of(got) or {}
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
    require_label(ctx)
    model = artifacts_of(ctx).models[0]
    run, container = container_of(ctx)
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
    require_label(ctx)
    _, container = container_of(ctx)
    name = unknown_name("get")
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
    require_label(ctx)
    artifacts = artifacts_of(ctx)
    run, container = container_of(ctx)
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
