"""The ports and hostname the platform gives model containers (emulator/model/platform_env.py)."""

from __future__ import annotations

from emulator.model import messages, platform_env
from emulator.model.containers import MAX_CONTAINERS


def _range(text: str) -> range:
    first, last = (int(p) for p in text.split("-"))
    return range(first, last + 1)


def test_no_container_of_a_multi_container_instance_is_told_8080_and_no_two_share_a_port() -> None:
    told = [platform_env.multi_container_ports(i) for i in range(MAX_CONTAINERS)]
    assert told[0] == platform_env.ContainerPorts(9081, "9100-9199")
    assert told[1].environment() == {
        "SAGEMAKER_BIND_TO_PORT": "9082",
        "SAGEMAKER_SAFE_PORT_RANGE": "9200-9299",
    }
    claimed = [p.bind_port for p in told] + [port for p in told for port in _range(p.safe_port_range)]
    assert len(claimed) == len(set(claimed))  # they share one network namespace
    assert not {8080, 8081, 8082} & set(claimed)  # 8080: the port a server listens on when told none


def test_a_single_container_gets_a_range_and_no_bind_port() -> None:
    assert platform_env.single_container_environment() == {"SAGEMAKER_SAFE_PORT_RANGE": "21000-21999"}
    assert platform_env.HOSTNAME == "model.aws.local"


def test_the_failure_reason_names_the_container_and_its_port() -> None:
    assert messages.silent_on_bind_port([("a", 9081), ("b", 9082)], default_port_answers=False) == (
        " The container a was told SAGEMAKER_BIND_TO_PORT=9081; nothing answered HTTP there."
        " The container b was told SAGEMAKER_BIND_TO_PORT=9082; nothing answered HTTP there."
    )
    assert messages.silent_on_bind_port([("a", 9081)], default_port_answers=True).endswith(
        "must listen on the port in SAGEMAKER_BIND_TO_PORT instead of 8080."
    )
