"""SageMaker's client-visible texts, in one place (shared/spec/hosting-contract.md §1.8, §6.8, §11.3),
one module per API area; every text is reachable as `messages.<name>`.

Texts marked [U] in the spec are smlocal's own choice; docs/api-coverage.md lists them.
"""

from __future__ import annotations

from emulator.model.messages import (
    async_inference,
    components,
    images,
    instances,
    model_data,
    multi_container,
    resources,
    scaling,
    serverless,
    streaming,
)
from emulator.model.messages.async_inference import *  # noqa: F403
from emulator.model.messages.components import *  # noqa: F403
from emulator.model.messages.images import *  # noqa: F403
from emulator.model.messages.instances import *  # noqa: F403
from emulator.model.messages.model_data import *  # noqa: F403
from emulator.model.messages.multi_container import *  # noqa: F403
from emulator.model.messages.resources import *  # noqa: F403
from emulator.model.messages.scaling import *  # noqa: F403
from emulator.model.messages.serverless import *  # noqa: F403
from emulator.model.messages.streaming import *  # noqa: F403

__all__ = [
    *resources.__all__,
    *scaling.__all__,
    *multi_container.__all__,
    *streaming.__all__,
    *async_inference.__all__,
    *serverless.__all__,
    *images.__all__,
    *model_data.__all__,
    *instances.__all__,
    *components.__all__,
]
