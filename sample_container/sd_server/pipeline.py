"""The Stable Diffusion pipeline: which device, loading it from the model folder, making one PNG.

Deterministic for a seed on the same stack (same weights, torch, diffusers, device kind): the noise
comes from a torch.Generator seeded on the pipeline's own device, and the PNG is written without any
time or text chunk, so the same request gives the same bytes.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .inputs import GenerationRequest

log = logging.getLogger("sd_server.pipeline")

#: The file every diffusers pipeline folder has at its top.
MODEL_INDEX = "model_index.json"
#: Called in the generation thread after each denoising step: on_step(step, steps), step counting from 1.
StepCallback = Callable[[int, int], None]
#: Below this many parameters a pipeline runs on one CPU thread (see cpu_threads_for).
SMALL_MODEL_PARAMETERS = 50_000_000


class ModelLoadError(RuntimeError):
    """The model folder cannot be loaded as a Stable Diffusion pipeline."""


def _torch() -> Any:
    # imported here so that `inputs` and the server's startup do not pay for torch before they listen
    return importlib.import_module("torch")


def pick_device() -> tuple[str, Any]:
    """("cuda", torch.float16) when torch sees a GPU, else ("cpu", torch.float32)."""
    torch = _torch()
    if torch.cuda.is_available():
        return "cuda", torch.float16
    return "cpu", torch.float32


def dtype_for(device: str) -> Any:
    """float16 on a GPU (half the memory, tensor cores), float32 elsewhere (CPUs lack fast fp16)."""
    torch = _torch()
    return torch.float16 if device.startswith("cuda") else torch.float32


def load_pipeline(model_dir: Path, device: str | None = None) -> Any:
    """The StableDiffusionPipeline in `model_dir`, on `device` (None: pick_device()), offline, ready to run.

    Raises ModelLoadError when the folder is not a diffusers pipeline; diffusers' own errors (a missing
    component, bad weights) pass through with their messages.
    """
    model_dir = Path(model_dir)
    if not (model_dir / MODEL_INDEX).is_file():
        found = (
            sorted(p.name for p in model_dir.iterdir())[:10] if model_dir.is_dir() else "no such directory"
        )
        nested = (
            sorted(p.parent.name for p in model_dir.glob(f"*/{MODEL_INDEX}")) if model_dir.is_dir() else []
        )
        hint = f" ({nested[0]}/{MODEL_INDEX} is one level too deep)" if nested else ""
        raise ModelLoadError(
            f"{model_dir} holds no {MODEL_INDEX}{hint} (found: {found}): "
            "the model data must be a diffusers Stable Diffusion folder packed with model_index.json at the "
            "top of model.tar.gz (python3 -m sample_container.model_builder --from FOLDER --out model.tar.gz)"
        )
    started = time.monotonic()
    device = device or pick_device()[0]
    dtype = dtype_for(device)
    diffusers = importlib.import_module("diffusers")
    diffusers.utils.logging.disable_progress_bar()
    importlib.import_module("transformers").utils.logging.disable_progress_bar()
    imported = time.monotonic()
    pipe = diffusers.StableDiffusionPipeline.from_pretrained(
        model_dir,
        dtype=dtype,  # diffusers 0.42 deprecates torch_dtype
        local_files_only=True,
        # without accelerate diffusers would warn and fall back to False anyway
        low_cpu_mem_usage=importlib.util.find_spec("accelerate") is not None,
    )
    read = time.monotonic()
    pipe = pipe.to(device)
    log.info(
        "imports %.2f s, from_pretrained %.2f s, to(%s) %.2f s",
        imported - started,
        read - imported,
        device,
        time.monotonic() - read,
    )
    pipe.set_progress_bar_config(disable=True)
    if device == "cpu" and not os.environ.get("OMP_NUM_THREADS"):
        threads = cpu_threads_for(pipe)
        if threads is not None:
            _torch().set_num_threads(threads)
            log.info(
                "a small model on the CPU: torch uses %d thread (set OMP_NUM_THREADS to choose)", threads
            )
    return pipe


def parameter_count(pipe: Any) -> int:
    return sum(
        sum(p.numel() for p in module.parameters())
        for module in (getattr(pipe, name, None) for name in ("unet", "vae", "text_encoder"))
        if module is not None
    )


def cpu_threads_for(pipe: Any) -> int | None:
    """1 for a small pipeline (the tiny test model), None (torch's default) for a real one.

    A tiny model gains nothing from intra-op threads, and loses badly when the cores are shared: on a
    busy 2-core machine a 64x64 image took 6 s on 2 OpenMP threads against 0.06 s on one.
    """
    return 1 if parameter_count(pipe) < SMALL_MODEL_PARAMETERS else None


def generate(pipe: Any, request: GenerationRequest, on_step: StepCallback | None = None) -> bytes:
    """One image for `request`, as PNG bytes. Blocking: call it from a worker thread, one at a time.

    `on_step(step, steps)` runs after each denoising step (diffusers' callback_on_step_end), in this
    thread; `steps` is the number of UNet passes the pipeline makes (`pipe.num_timesteps`: SD 1.x's
    PNDM scheduler makes num_inference_steps + 1, its first step being a warm-up). An exception raised
    by on_step ends the generation with that exception (how a stream whose client left stops early).
    """
    torch = _torch()
    generator = torch.Generator(device=pipe.device).manual_seed(request.seed)
    extra: dict[str, Any] = {}
    if on_step is not None:
        report = on_step

        on_gpu = getattr(pipe.device, "type", "cpu") == "cuda"

        def step_ended(pipeline: Any, index: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
            if on_gpu:
                # CUDA kernels run asynchronously: without this the loop, and its progress lines, run
                # ahead of the GPU by as many steps as the launch queue holds.
                torch.cuda.synchronize(pipeline.device)
            report(index + 1, int(pipeline.num_timesteps))
            return tensors

        extra["callback_on_step_end"] = step_ended
    with torch.inference_mode():
        result = pipe(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            num_inference_steps=request.num_inference_steps,
            guidance_scale=request.guidance_scale,
            height=request.height,
            width=request.width,
            generator=generator,
            output_type="pil",
            **extra,
        )
    image = result.images[0]
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
