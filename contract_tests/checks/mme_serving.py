"""mme.invoke, mme.unload, mme.reload: serving, unloading and reloading the models mme.load loaded (hosting
contract §5), on the multi-model container contract_tests.checks.mme starts and tracks (see its docstring:
one container per run, each check bringing it to the state it needs through calls other checks verify).
"""

from __future__ import annotations

from contract_tests.checks.mme_calls import (
    API_FIX,
    RELOAD_COPY,
    TARGET_HEADER,
    UNLOAD_COPY,
    artifacts_of,
    call,
    container_of,
    ensure_loaded,
    entry_problem,
    get,
    list_all,
    load,
    logs_of,
    require_label,
    unknown_name,
)
from contract_tests.multi_model import (
    MmeModel,
    layout_copy,
)
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.running import RunningContainer
from contract_tests.target import CheckContext


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
    require_label(ctx)
    artifacts = artifacts_of(ctx)
    run, container = container_of(ctx)
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
                    f"{logs_of(container)}\nServe a loaded model on POST /models/{{name}}/invoke (404 means "
                    f"'not loaded' to SageMaker)."
                )
            ctx.warn(
                f"{model.target_model} answered HTTP {reply.status} to {ctx.config.payloads[0].source}: pass "
                f"--payload with an input the models accept to see them answer"
            )
        served.append(f"{model.target_model} HTTP {reply.status}")
    name = unknown_name("invoke")
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
        if entry_problem(reply, model) is None:
            return f"GET /models/{model.name} still shows it ({reply.describe()})"
        control = get(ctx, container, unknown_name("unload"))
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
    require_label(ctx)
    artifacts = artifacts_of(ctx)
    run, container = container_of(ctx)
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
            f"{logs_of(container)}\nSageMaker expects a 2xx once the model is unloaded and its memory freed."
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
    require_label(ctx)
    artifacts = artifacts_of(ctx)
    run, container = container_of(ctx)
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
        problem = entry_problem(get(ctx, container, model.name), model)
    if problem is not None:
        raise CheckFailed(
            f"{model.name} was loaded, then unloaded (DELETE answered HTTP {reply.status}, GET /models/"
            f"{model.name} 404); loading it again: {problem}. SageMaker loads an evicted model again under "
            f"the same model_name: forget a model entirely when it is unloaded."
        )
    run.loaded[model.name] = model
    return f"{model.name} loaded, unloaded and loaded again"
