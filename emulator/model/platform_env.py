"""What the platform gives a model container besides its model's Environment: the ports it is told
and the hostname it runs under (hosting contract §3.5, §4). Pure values, in one place: the emulator's
fleet starts instances with them and the contract tester (`smlocal check`, SageMakerContainer) starts
its containers with them, so both run a container as the same SageMaker endpoint would.

- **One container** (a single-container or multi-model endpoint): port 8080, no
  SAGEMAKER_BIND_TO_PORT, `SAGEMAKER_SAFE_PORT_RANGE=21000-21999` and the hostname
  `model.aws.local`, as the environment dump of a SageMaker PyTorch endpoint shows
  (pytorch/serve#631: `SAGEMAKER_SAFE_PORT_RANGE=21000-21999`, `HOSTNAME=model.aws.local`, no
  SAGEMAKER_BIND_TO_PORT; a multi-model endpoint's dump in pytorch/serve#1028 showed 25000-25999:
  the range varies, smlocal always gives the first one seen) [O].
- **A multi-container model** (inference pipeline or Direct): container i (from 0) is told
  SAGEMAKER_BIND_TO_PORT = 9081 + i and SAGEMAKER_SAFE_PORT_RANGE = 9100 + 100 i .. 9199 + 100 i [U:
  SageMaker documents the variables, not the values]. No container is told 8080 (SageMaker documents
  the variable as the port to listen on *instead of* 8080), so an image that hard-wires 8080 fails
  in any position; the ports of the at most 15 containers and their ranges are all distinct (they
  share one network namespace) and clear of 8080-8082 (ports servers commonly open besides).
  The containers of one instance share its hostname, `model.aws.local` too [U]: Docker gives a
  container that joins another's network namespace that container's hostname (it refuses one of its
  own); each ContainerHostname resolves to 127.0.0.1 inside the instance instead.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The port a container listens on when it is told none (hosting contract §3.3).
DEFAULT_PORT = 8080
#: The hostname of every model container (`hostname`, $HOSTNAME inside it) [O].
HOSTNAME = "model.aws.local"
#: SAGEMAKER_SAFE_PORT_RANGE of a single-container (or multi-model) endpoint's container [O].
SINGLE_CONTAINER_SAFE_PORT_RANGE = "21000-21999"
#: A multi-container instance's first container's SAGEMAKER_BIND_TO_PORT (the next ones: + 1 each) [U].
FIRST_BIND_PORT = 9081
#: The first port of the first container's SAGEMAKER_SAFE_PORT_RANGE, and each container's share [U].
SAFE_PORTS_START = 9100
SAFE_PORTS_PER_CONTAINER = 100

BIND_TO_PORT_ENV = "SAGEMAKER_BIND_TO_PORT"
SAFE_PORT_RANGE_ENV = "SAGEMAKER_SAFE_PORT_RANGE"


@dataclass(frozen=True)
class ContainerPorts:
    """The ports one container of a multi-container instance is told."""

    bind_port: int
    safe_port_range: str

    def environment(self) -> dict[str, str]:
        return {BIND_TO_PORT_ENV: str(self.bind_port), SAFE_PORT_RANGE_ENV: self.safe_port_range}


def multi_container_ports(index: int) -> ContainerPorts:
    """The ports of container `index` (from 0, in the model's order) of a multi-container instance."""
    first = SAFE_PORTS_START + index * SAFE_PORTS_PER_CONTAINER
    return ContainerPorts(FIRST_BIND_PORT + index, f"{first}-{first + SAFE_PORTS_PER_CONTAINER - 1}")


def single_container_environment() -> dict[str, str]:
    """The variables the platform sets in a single-container (or multi-model) endpoint's container."""
    return {SAFE_PORT_RANGE_ENV: SINGLE_CONTAINER_SAFE_PORT_RANGE}
