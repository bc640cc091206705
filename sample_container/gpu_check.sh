#!/usr/bin/env bash
# GPU check for the Stable Diffusion sample, without Docker: on a machine with an NVIDIA GPU and PyTorch
# (plus diffusers, transformers, aiohttp, Pillow: sample_container/requirements.txt with a CUDA torch),
# build the tiny model with the model builder, start the server as the image does
# (`python3 -m sd_server serve`), and print how long the pipeline takes to load (to the first /ping 200)
# and to make a 512x512 image in 25 fp16 steps (a warm-up, then mean and min of 3 runs); then the same
# for each real diffusers folder given.
#
#   sample_container/gpu_check.sh                          # the tiny model on the GPU
#   sample_container/gpu_check.sh /models/sd-v1-5          # and a real model folder
#   sample_container/gpu_check.sh --cpu --size 64 --steps 4 --runs 2   # a smoke test without a GPU
#
# Options (passed to gpu_check.py): --cpu, --size N, --steps N, --runs N, --skip-tiny, --json FILE, -v.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"

cpu=0
for arg in "$@"; do [ "$arg" = "--cpu" ] && cpu=1; done

"$python" - "$cpu" <<'EOF'
import sys
try:
    import torch, diffusers, transformers, aiohttp  # noqa: F401
except ImportError as exc:
    sys.exit(f"gpu_check: {exc.name} is missing: pip install -r sample_container/requirements.txt "
             "(with a CUDA build of torch for the GPU)")
cpu = sys.argv[1] == "1"
print(f"torch {torch.__version__}, diffusers {diffusers.__version__}, transformers {transformers.__version__}")
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(f"GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}")
elif not cpu:
    sys.exit("gpu_check: torch sees no CUDA device; run with --cpu for a CPU smoke test")
EOF

exec "$python" "$here/gpu_check.py" "$@"
