"""Testcontainers' reaper (Ryuk) for SageMakerContainer: started as DockerContainer starts it, or one
clear error.

Ryuk is a container of its own (image testcontainers/ryuk) that removes a test session's containers
when the session's process dies. testcontainers starts it before the first container unless
TESTCONTAINERS_RYUK_DISABLED=true; where no registry can be reached its image cannot be pulled, and
testcontainers' own failure is a docker APIError some 60 traceback lines deep. start_reaper() turns
any failure to start it into ReaperUnavailable, whose message names the cause's first line and the
two ways out (the variable, or the image loaded into the engine). SageMakerContainer does not need
Ryuk: stop() removes its container, and `smlocal down` removes those of a killed test process (by
their owner labels).
"""

from __future__ import annotations

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import Reaper

from emulator.errors import SetupError


class ReaperUnavailable(SetupError):
    """testcontainers' reaper could not be started (its image cannot be pulled, most often)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


def reaper_message(image: str, cause: BaseException) -> str:
    """What ReaperUnavailable says, with the first line of the error testcontainers met."""
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return (
        f"testcontainers' reaper (Ryuk, image {image}) could not be started: {type(cause).__name__}: "
        f"{first[:300]}. Where no registry can be reached its image cannot be pulled: set "
        "TESTCONTAINERS_RYUK_DISABLED=true (SageMakerContainer.stop() removes its own container, and "
        "`smlocal down` those of a killed test process), or load the image into the engine (docker load)."
    )


def start_reaper() -> None:
    """Start Ryuk once per process, as DockerContainer.start() does, unless it is disabled."""
    if testcontainers_config.ryuk_disabled:
        return
    try:
        Reaper.get_instance()
    except Exception as exc:  # noqa: BLE001 - any failure (pull, start, its socket) means no reaper
        Reaper.delete_instance()  # whatever it had started (a socket, a container) goes too
        raise ReaperUnavailable(reaper_message(testcontainers_config.ryuk_image, exc), exc) from None
