"""Commands that run on their own: `smlocal check` (the hosting-contract checks, contract_tests) and
`smlocal demo` (the Stable Diffusion sample end to end, with a server of its own)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path


def cmd_check(args: argparse.Namespace) -> int:
    from contract_tests.cli import run

    return run(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from emulator.demo import DemoOptions, run_demo

    options = DemoOptions(
        out=Path(args.out),
        gpu=args.gpu,
        torch=args.torch,
        port=args.port,
        keep=args.keep,
        state_dir=Path(args.state_dir),
        build_dir=Path(args.build_dir),
        steps=args.steps,
        seed=args.seed,
        width=args.size,
        height=args.size,
        stream=args.stream,
    )
    return run_demo(options if args.prompt is None else replace(options, prompt=args.prompt))
