"""Labels on every container smlocal starts, so that nothing is ever left behind unowned."""

from __future__ import annotations

import hashlib
from pathlib import Path

MANAGED = "smlocal.managed"
OWNER = "smlocal.owner"  # digest of the state dir of the server that owns it
ROLE = "smlocal.role"  # "endpoint" | "check" | "bench" | ROLE_TESTCONTAINER
#: The ROLE of a contract_tests.containers.SageMakerContainer (its OWNER: check-<pid>, as a check's).
ROLE_TESTCONTAINER = "testcontainer"
#: A check container's owner (OWNER is `check-<pid>`): the host and the process's start time, so that
#: a container of an ended run is told apart from a live run's (emulator/process_owner.py).
OWNER_HOST = "smlocal.owner-host"
OWNER_STARTED = "smlocal.owner-started"
ENDPOINT = "smlocal.endpoint"
VARIANT = "smlocal.variant"
INSTANCE = "smlocal.instance"
SPEC_DIGEST = "smlocal.spec-digest"
#: An inference component's copy: the component's name, and the id of the endpoint instance (a
#: capacity record, not a container: hosting/components/) it is placed on.
COMPONENT = "smlocal.inference-component"
HOST = "smlocal.host"

MANAGED_SELECTOR = {MANAGED: "true"}


def owner_id(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]


CONTAINER_PORT = "smlocal.container-port"

#: EnableNetworkIsolation: the model container, its forwarder and its internal network share this
#: label (the model container's name), so that each part finds, and removes, the others.
ISOLATION_GROUP = "smlocal.isolation-group"
ROLE_FORWARDER = "forwarder"  # the ROLE of an isolated container's forwarder

#: A multi-container instance: the ROLE of its network container (the one whose network namespace
#: every container of the instance joins, publishing their ports), and each model container's name.
ROLE_INSTANCE_NET = "instance-net"
CONTAINER_HOSTNAME = "smlocal.container-hostname"
