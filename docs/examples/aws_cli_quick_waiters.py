"""Write a copy of botocore's SageMaker waiters that poll every second, for AWS_DATA_PATH.

    python aws_cli_quick_waiters.py DIR      # with the Python the `aws` command runs on (its venv's)
    export AWS_DATA_PATH=DIR                  # then `aws sagemaker wait ...` polls every 1 s

`aws sagemaker wait endpoint-in-service` (AWS CLI v1) takes its delay from botocore's waiter model:
30 s between two DescribeEndpoint calls, with no option to change it. botocore looks for data files
in the folders of AWS_DATA_PATH before its own, so a waiters-2.json there replaces the built-in one.
Only the delays change: the acceptors and attempts stay botocore's (max attempts are raised so that
each waiter still gives up after the same time).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

try:  # awscli 1.46 and later carry their own copy of botocore
    from awscli.botocore import session as botocore_session
except ImportError:
    from botocore import session as botocore_session  # type: ignore[no-redef]

DELAY_S = 1


def write_quick_waiters(folder: Path, service: str = "sagemaker") -> Path:
    loader = botocore_session.get_session().get_component("data_loader")
    version = loader.determine_latest_version(service, "waiters-2")
    model = loader.load_service_model(service, "waiters-2", version)
    for waiter in model["waiters"].values():
        waiter["maxAttempts"] = waiter["maxAttempts"] * waiter["delay"] // DELAY_S
        waiter["delay"] = DELAY_S
    target = folder / service / version / "waiters-2.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(model, indent=1))
    return target


if __name__ == "__main__":
    print(write_quick_waiters(Path(sys.argv[1])))
