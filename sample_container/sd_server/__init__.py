"""Stable Diffusion behind SageMaker's hosting contract: `python3 -m sd_server serve`.

inputs (the request body), pipeline (device, loading, one PNG), server (aiohttp app and serving),
__main__ (the entry point; SIGTERM handled from its first line). Only the standard library, aiohttp,
torch, diffusers, transformers, Pillow and numpy are used; torch and diffusers are imported only when
the pipeline loads, so the server listens before they are.
"""
