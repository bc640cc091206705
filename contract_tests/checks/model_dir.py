"""model-dir checks: the container works with /opt/ml/model mounted read-only, and ships nothing there
(hosting contract §3.2).

model-dir.read-only watches for writes itself: a probe container (checks/write_probe.py) gets
/opt/ml/model writable, as an overlay over the model dir that collects its writes (whatever the model's
size, nothing copied), starts, serves one invocation and is removed; any file created, changed or
removed there, or any change of mode, is a write the read-only mount refuses on SageMaker, whatever the
image does with the error. The log's EROFS lines explain a container that crashes on the read-only mount.
"""

from __future__ import annotations

from contract_tests.checks.write_probe import MODEL_DIR, Probe, write_probe
from contract_tests.registry import check
from contract_tests.result import CheckFailed, CheckSkipped
from contract_tests.target import CheckContext

#: strerror(EROFS), as every libc and language runtime prints it.
EROFS_TEXT = "read-only file system"
#: How long the probe waits for a container that crashed on the read-only mount to become healthy
#: with a writable one (at most the startup limit).
CRASHED_PROBE_DEADLINE_S = 60.0
_SHOWN = 10
READ_ONLY_FIX = (
    f"Do not write to {MODEL_DIR}: SageMaker mounts it read-only. Write caches, compiled models and "
    "unpacked files to a writable directory such as /tmp (or copy the model there first)."
)


def erofs_lines(logs: str, path: str | None = None) -> list[str]:
    """The log lines that report EROFS ("Read-only file system"), optionally only those naming `path`."""
    return [
        line.strip()
        for line in logs.splitlines()
        if EROFS_TEXT in line.lower() and (path is None or path in line)
    ]


IMAGE_FILES_FIX = (
    f"Do not ship files under {MODEL_DIR}: the model mount hides them. Put the inference code under "
    "/opt/program (or anywhere outside /opt/ml) and point to it (e.g. SAGEMAKER_PROGRAM and "
    "SAGEMAKER_SUBMIT_DIRECTORY, or the serving stack's own setting), and put model files into "
    "model.tar.gz (ModelDataUrl), with code under code/ in the archive where the serving stack expects it."
)


def shadowed(paths: list[str]) -> list[str]:
    """The image's paths under /opt/ml/model that the mount hides: leaves only (a folder is listed
    through its files; an empty folder is listed itself, the file list cannot tell it from a file)."""
    inside = {p.rstrip("/") for p in paths if p.startswith(MODEL_DIR + "/")}
    parents = {p.rsplit("/", 1)[0] for p in inside}
    return sorted(p for p in inside if p not in parents)


@check(
    "model-dir.image-files",
    "the image ships nothing under /opt/ml/model",
    f"SageMaker mounts the model data at {MODEL_DIR} (hosting contract §3.2), which hides every file the "
    "image has there: code or weights copied there at build time are missing at run time (the classic "
    "result is 'Please provide a model_fn implementation': inference code under /opt/ml/model/code is "
    "gone). smlocal mounts an empty folder when there is no model data. SageMaker itself does not refuse "
    "such an image, so this is a warning (repeated in the summary line), not a failure; "
    "invocations that then fail are the invocation checks' failures.",
    IMAGE_FILES_FIX,
    before="COPY inference.py /opt/ml/model/code/inference.py\nCOPY model.pth /opt/ml/model/",
    after="COPY inference.py /opt/program/inference.py\n# model.pth (and code/inference.py) in model.tar.gz",
)
def image_files(ctx: CheckContext) -> str:
    """From the image's file list (ctx.target.paths): the paths under /opt/ml/model, which the model
    mount hides at run time. Passes always; a headline warning lists them."""
    hidden = shadowed(ctx.target.paths)
    ctx.evidence["shadowed"] = hidden[:100]
    if not hidden:
        return f"nothing under {MODEL_DIR} in the image"
    more = f" and {len(hidden) - _SHOWN} more" if len(hidden) > _SHOWN else ""
    listed = ", ".join(hidden[:_SHOWN]) + more
    ctx.evidence["count"] = len(hidden)
    ctx.warn(
        f"the image ships {len(hidden)} path(s) under {MODEL_DIR}, hidden at run time by the model mount: "
        f"{listed}; ship code under /opt/program and model files in model.tar.gz",
        headline=True,
    )
    return f"{len(hidden)} path(s) under {MODEL_DIR} in the image are hidden by the model mount (a warning)"


def _listed(found: list[str]) -> str:
    more = f"; and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    return "; ".join(found[:_SHOWN]) + more


def _record(ctx: CheckContext, probe: Probe) -> None:
    ctx.evidence.update(
        probe_healthy=probe.healthy,
        probe_observation=probe.observation,
        probe_invocation=probe.invocation,
        probe_changes=probe.changes[:100],
    )


@check(
    "model-dir.read-only",
    "works with /opt/ml/model mounted read-only, and writes nothing there",
    f"The model artifacts are mounted at {MODEL_DIR} read-only; the container must not write there "
    "(hosting contract §3.2: 'Do not write to this directory'). A write that the image catches and "
    "ignores still fails on SageMaker (the file it meant to write is missing), so the check watches a "
    "writable overlay of the model dir in a probe container of its own: any file created, changed or "
    "removed there during startup and one invocation fails the check.",
    READ_ONLY_FIX,
    before='try:\n    torch.save(compiled, "/opt/ml/model/compiled.pt")\nexcept OSError:\n    pass',
    after='os.makedirs("/tmp/cache", exist_ok=True)\ntorch.save(compiled, "/tmp/cache/compiled.pt")',
)
def read_only(ctx: CheckContext) -> str:
    """The shared container (read-only mount, as SageMaker) must start, and its logs must report no
    EROFS failure on /opt/ml/model; the write probe (a writable overlay, see write_probe) must see no
    change. When the shared container crashes on the read-only mount, its EROFS log line explains it;
    with no such line, the probe tells whether a write was what broke it."""
    startup = ctx.target.startup()  # the shared container: /opt/ml/model is always mounted read-only
    limits = ctx.config.limits
    if not startup.healthy:
        seen = (
            f"the container exited with code {startup.exit_code} during startup"
            if startup.exited
            else f"the container did not become healthy within {startup.elapsed_s:.1f} s"
        )
        lines = erofs_lines(startup.all_logs or startup.logs)
        if lines:
            raise CheckFailed(
                f"{seen}, and its logs report a write to the read-only {MODEL_DIR}: `{lines[-1]}`. "
                f"Last log lines:\n{startup.logs}\nFix: {READ_ONLY_FIX}",
                erofs_lines=lines,
                exit_code=startup.exit_code,
                log_tail=startup.logs,
            )
        skip = (
            f"the container did not become healthy for another reason ({startup.last_observation}); "
            "see the start.* checks"
        )
        if startup.start_error is not None or not startup.exited:
            raise CheckSkipped(skip)
        # It crashed without saying EROFS: does it start when it may write there (a reworded error)?
        probe = write_probe(ctx, min(limits.startup_timeout_s, CRASHED_PROBE_DEADLINE_S))
        if probe is None or not probe.healthy or not probe.changes:
            if probe is not None:
                _record(ctx, probe)
            raise CheckSkipped(skip)
        _record(ctx, probe)
        raise CheckFailed(
            f"{seen} with {MODEL_DIR} read-only, but with {probe.given} the container became "
            f"healthy and wrote there: {_listed(probe.changes)}. Its write to the read-only {MODEL_DIR} "
            f"is what fails on SageMaker (the error was not reported as 'Read-only file system'). "
            f"Fix: {READ_ONLY_FIX}",
            exit_code=startup.exit_code,
            log_tail=startup.logs,
        )
    container = ctx.target.healthy()
    lines = erofs_lines(container.logs(), MODEL_DIR)
    probe = write_probe(ctx, limits.startup_timeout_s)
    if probe is not None:
        _record(ctx, probe)
    if probe is not None and probe.changes:
        logged = f" Its logs report: `{lines[-1]}`." if lines else ""
        raise CheckFailed(
            f"the container writes to {MODEL_DIR}, which SageMaker mounts read-only: a container given "
            f"{probe.given} {_listed(probe.changes)} (during startup and one invocation, "
            f"{probe.invocation or 'not sent'}).{logged} With the read-only mount these writes fail, "
            f"whether or not the image reports it, and what it meant to write is missing. "
            f"Fix: {READ_ONLY_FIX}",
            erofs_lines=lines,
        )
    if lines:
        raise CheckFailed(
            f"the container became healthy, but its logs report a failed write to the read-only "
            f"{MODEL_DIR}: `{lines[-1]}` ({len(lines)} such line(s)); whatever it meant to write there "
            f"is missing. Fix: {READ_ONLY_FIX}",
            erofs_lines=lines,
        )
    healthy = f"healthy after {startup.first_healthy_s or startup.elapsed_s:.2f} s with {MODEL_DIR} read-only"
    if probe is None:
        return f"{healthy}; no write failure there in its logs (write probe not run)"
    if not probe.healthy:
        ctx.warn(
            f"write probe inconclusive: the container with {probe.given.replace('of it', 'of ' + MODEL_DIR)} "
            f"did not become "
            f"healthy ({probe.observation}); only the logs were read for failed writes"
        )
        return f"{healthy}; no write failure there in its logs (write probe inconclusive)"
    return (
        f"{healthy}; a container with {probe.given} started, answered one invocation "
        f"({probe.invocation}) and changed nothing there"
    )
