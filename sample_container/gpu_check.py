"""Time the Stable Diffusion sample without Docker: pipeline load and 512x512 generation (see gpu_check.sh).

For the tiny random model (built here with the model builder) and for each real diffusers folder given,
it starts the server as the image does (`python3 -m sd_server serve`, PYTHONPATH=sample_container) on
127.0.0.1, and measures:
- load: from starting the process to the first GET /ping 200 (imports + from_pretrained + .to(device)),
  and the server's own figure for the pipeline alone;
- generation: one warm-up POST /invocations (first CUDA kernels, allocator), then --runs timed ones at
  --size x --size, --steps steps (mean and min of the wall time, and steps per second);
- shutdown: SIGTERM to exit, and the exit code (0 expected).
Only the standard library is used here; torch, diffusers and the rest are the server's business.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: How long a model may take to load (SageMaker's startup health-check default is 480 s).
LOAD_BUDGET_S = 600.0
PING_INTERVAL_S = 0.05


@dataclass
class Figures:
    model: str
    device: str
    size: int
    steps: int
    load_to_healthy_s: float | None = None
    pipeline_load_s: float | None = None
    weights_s: float | None = None
    warmup_s: float | None = None
    runs_s: list[float] = field(default_factory=list)
    png_bytes: int | None = None
    exit_code: int | None = None
    exit_s: float | None = None
    error: str | None = None

    @property
    def mean_s(self) -> float | None:
        return statistics.fmean(self.runs_s) if self.runs_s else None

    @property
    def min_s(self) -> float | None:
        return min(self.runs_s) if self.runs_s else None


class ServerProcess:
    """`python3 -m sd_server serve` with its output echoed (indented) and searched for two lines."""

    def __init__(self, model_dir: Path, device: str, echo: bool) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
            "SAGEMAKER_BIND_TO_PORT": "0",  # any free port; read back from the log
            "SD_DEVICE": device,
            "SD_MAX_SIDE": "2048",
        }
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sd_server",
                "serve",
                "--model-dir",
                str(model_dir),
                "--host",
                "127.0.0.1",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.echo = echo
        self.port: int | None = None
        self.pipeline_load_s: float | None = None
        self.weights_s: float | None = None
        self.listening = threading.Event()
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if self.echo:
                print(f"    | {line.rstrip()}", flush=True)
            if "listening on" in line and self.port is None:
                self.port = int(line.rsplit(":", 1)[1])
                self.listening.set()
            if "pipeline loaded from" in line:
                self.pipeline_load_s = float(line.split(" in ", 1)[1].split(" s", 1)[0])
            if "from_pretrained" in line and " s, to(" in line:
                # "imports A s, from_pretrained B s, to(cuda) C s": the weights alone are B + C
                parts = [p.strip().rsplit(" ", 2) for p in line.split("imports", 1)[1].split(",")]
                self.weights_s = sum(float(p[-2]) for p in parts[1:])
        self.listening.set()  # the process ended: nobody waits for a port any more

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_healthy(self, budget_s: float) -> float:
        """Seconds from the process start to the first /ping 200; RuntimeError when it does not come."""
        if not self.listening.wait(budget_s) or self.port is None:
            raise RuntimeError("the server never listened:\n" + "\n".join(self.lines[-20:]))
        deadline = self.started + budget_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited with code {self.proc.returncode}:\n" + "\n".join(self.lines[-20:])
                )
            try:
                with urllib.request.urlopen(self.url("/ping"), timeout=2) as answer:
                    if answer.status == 200:
                        return time.monotonic() - self.started
            except urllib.error.HTTPError as exc:
                if exc.code != 503:
                    raise RuntimeError(f"GET /ping answered {exc.code}: {exc.read()[:300]!r}") from exc
            except OSError:
                pass
            time.sleep(PING_INTERVAL_S)  # polling interval
        raise RuntimeError(f"no /ping 200 within {budget_s:g} s")

    def generate(self, size: int, steps: int, seed: int) -> tuple[float, int]:
        body = {"prompt": "a lighthouse on a cliff at dusk, oil painting", "seed": seed}
        body.update(height=size, width=size, num_inference_steps=steps)
        request = urllib.request.Request(
            self.url("/invocations"),
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Accept": "image/png"},
        )
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=600) as answer:
            png = answer.read()
            if answer.status != 200 or not png.startswith(b"\x89PNG"):
                raise RuntimeError(f"POST /invocations answered {answer.status} {png[:200]!r}")
        return time.monotonic() - started, len(png)

    def terminate(self, grace_s: float = 30.0) -> tuple[int | None, float]:
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        return code, time.monotonic() - started


def measure(name: str, model_dir: Path, args: argparse.Namespace) -> Figures:
    device = "cpu" if args.cpu else "cuda"
    figures = Figures(model=name, device=device, size=args.size, steps=args.steps)
    print(f"== {name}: {model_dir} on {device}, {args.size}x{args.size}, {args.steps} steps", flush=True)
    server = ServerProcess(model_dir, device, echo=args.verbose)
    try:
        figures.load_to_healthy_s = server.wait_healthy(LOAD_BUDGET_S)
        figures.pipeline_load_s = server.pipeline_load_s
        figures.weights_s = server.weights_s
        figures.warmup_s, figures.png_bytes = server.generate(args.size, args.steps, seed=0)
        for run in range(args.runs):
            seconds, _ = server.generate(args.size, args.steps, seed=run + 1)
            figures.runs_s.append(seconds)
    except (RuntimeError, OSError) as exc:
        figures.error = str(exc)
        print(f"   error: {exc}", flush=True)
    finally:
        figures.exit_code, figures.exit_s = server.terminate()
    return figures


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def report(all_figures: list[Figures]) -> None:
    print()
    print(
        f"{'model':<28} {'device':<6} {'to /ping 200':>13} {'pipeline':>10} {'from_pretrained':>15} "
        f"{'warm-up':>10} {'mean':>10} {'min':>10} {'steps/s':>8} {'exit':>10}"
    )
    for f in all_figures:
        rate = f"{f.steps / f.mean_s:.1f}" if f.mean_s else "-"
        exit_text = f"{f.exit_code} {f.exit_s:.1f}s" if f.exit_s is not None else "-"
        print(
            f"{f.model[:28]:<28} {f.device:<6} {_s(f.load_to_healthy_s):>13} {_s(f.pipeline_load_s):>10} "
            f"{_s(f.weights_s):>15} "
            f"{_s(f.warmup_s):>10} {_s(f.mean_s):>10} {_s(f.min_s):>10} {rate:>8} {exit_text:>10}"
        )
        if f.error:
            print(f"  {f.model}: {f.error.splitlines()[0]}")
    size, steps = all_figures[0].size, all_figures[0].steps
    print(
        "(to /ping 200: from the process start; pipeline: the server's load thread, imports included; "
        "from_pretrained: that call (lazy imports included) + .to(device))"
    )
    print(
        f"(generation: {size}x{size}, {steps} steps, guidance 7.5, wall time of POST /invocations, "
        f"{len(all_figures[0].runs_s)} runs after one warm-up)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="real diffusers folders to time as well")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (fp32) instead of CUDA (fp16)")
    parser.add_argument("--size", type=int, default=512, help="image side (default 512)")
    parser.add_argument("--steps", type=int, default=25, help="inference steps (default 25)")
    parser.add_argument("--runs", type=int, default=3, help="timed generations after the warm-up (default 3)")
    parser.add_argument("--skip-tiny", action="store_true", help="time only the folders given")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--verbose", "-v", action="store_true", help="echo the server's log")
    args = parser.parse_args(argv)
    for folder in args.models:
        if not (folder / "model_index.json").is_file():
            parser.error(f"{folder} is not a diffusers folder (no model_index.json)")
    sys.path.insert(0, str(ROOT))
    from sample_container.model_builder import build_tiny_model

    results: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="sd-gpu-check-") as tmp:
        if not args.skip_tiny:
            started = time.monotonic()
            tiny = build_tiny_model(Path(tmp) / "tiny")
            print(f"== tiny model built in {time.monotonic() - started:.2f} s at {tiny}", flush=True)
            results.append(measure("tiny (random weights)", tiny, args))
        for folder in args.models:
            results.append(measure(folder.name or str(folder), folder, args))
    if not results:
        parser.error("nothing to time: give a folder, or drop --skip-tiny")
    report(results)
    if args.json:
        rows = [{**asdict(f), "mean_s": f.mean_s, "min_s": f.min_s} for f in results]
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
        print(f"figures written to {args.json}")
    failed = [f for f in results if f.error or f.exit_code != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
