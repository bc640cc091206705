"""UpdateEndpoint's RetainAllVariantProperties, PendingDeploymentSummary and VariantStatus while a
variant changes, and UpdateEndpoint of an autoscaled variant; real echo containers, boto3."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of

pytestmark = pytest.mark.docker

SLOW = {"STARTUP_DELAY_S": "1.0"}  # /ping answers 200 after 1 s: each start is observable


def config(
    smlocal: Smlocal, name: str, model: str, count: int = 1, instance_type: str = "ml.m5.large"
) -> None:
    smlocal.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": instance_type,
            }
        ],
    )


def watch(
    smlocal: Smlocal, name: str, seen: Callable[[dict[str, Any]], None], timeout_s: float = 30.0
) -> dict[str, Any]:
    """Poll DescribeEndpoint, handing each answer to `seen`, until it is InService again."""
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = smlocal.sm.describe_endpoint(EndpointName=name)
        seen(described)
        if described["EndpointStatus"] not in ("Creating", "Updating") or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def drop(smlocal: Smlocal, *configs: str) -> None:
    for name in configs:
        try:
            smlocal.sm.delete_endpoint_config(EndpointConfigName=name)
        except ClientError:
            pass


def test_scaling_shows_variant_status_and_update_retains_properties(smlocal: Smlocal) -> None:
    smlocal.deploy("Retain", env=SLOW)
    try:
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Retain",
            DesiredWeightsAndCapacities=[
                {"VariantName": "AllTraffic", "DesiredInstanceCount": 2, "DesiredWeight": 0.5}
            ],
        )
        statuses: list[list[dict[str, Any]]] = []
        done = watch(
            smlocal, "Retain", lambda d: statuses.append(d["ProductionVariants"][0].get("VariantStatus", []))
        )
        assert done["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        during = next(s for s in statuses if s)
        assert [(s["Status"], s["StatusMessage"]) for s in during] == [
            ("Updating", "Scaling out desired instance count to 2."),
            ("Creating", "Launching 1 instance(s)."),
        ]
        assert "VariantStatus" not in done["ProductionVariants"][0]  # settled: no status entries

        # a new config with 1 instance; RetainAllVariantProperties keeps the 2 instances and weight 0.5
        config(smlocal, "Retain-2", "Retain", count=1)
        smlocal.sm.update_endpoint(
            EndpointName="Retain", EndpointConfigName="Retain-2", RetainAllVariantProperties=True
        )
        pending: list[dict[str, Any]] = []
        done = watch(smlocal, "Retain", lambda d: pending.append(d.get("PendingDeploymentSummary", {})))
        variant = done["ProductionVariants"][0]
        assert (done["EndpointConfigName"], variant["CurrentInstanceCount"], variant["CurrentWeight"]) == (
            "Retain-2",
            2,
            0.5,
        )
        assert "PendingDeploymentSummary" not in done
        summary = next(p for p in pending if p)
        assert summary["EndpointConfigName"] == "Retain-2"
        (pv,) = summary["ProductionVariants"]
        assert (pv["VariantName"], pv["DesiredInstanceCount"], pv["DesiredWeight"], pv["InstanceType"]) == (
            "AllTraffic",
            2,
            0.5,
            "ml.m5.large",
        )
        assert [(s["Status"], s["StatusMessage"]) for s in pv["VariantStatus"]] == [
            ("Creating", "Launching 2 instance(s).")
        ]

        # excluding DesiredInstanceCount takes the count from the config, the weight is still retained
        config(smlocal, "Retain-3", "Retain", count=1)
        smlocal.sm.update_endpoint(
            EndpointName="Retain",
            EndpointConfigName="Retain-3",
            RetainAllVariantProperties=True,
            ExcludeRetainedVariantProperties=[{"VariantPropertyType": "DesiredInstanceCount"}],
        )
        variant = watch(smlocal, "Retain", lambda d: None)["ProductionVariants"][0]
        assert (variant["CurrentInstanceCount"], variant["CurrentWeight"]) == (1, 0.5)

        # without it, the config's values
        smlocal.sm.update_endpoint(EndpointName="Retain", EndpointConfigName="Retain-2")
        variant = watch(smlocal, "Retain", lambda d: None)["ProductionVariants"][0]
        assert (variant["CurrentInstanceCount"], variant["CurrentWeight"]) == (1, 1.0)
    finally:
        smlocal.cleanup("Retain")
        drop(smlocal, "Retain-2", "Retain-3")


def test_update_of_an_autoscaled_variant_keeps_its_instance_type(smlocal: Smlocal) -> None:
    smlocal.deploy("Guarded")
    aas = boto3.client("application-autoscaling", endpoint_url=smlocal.server.url, **CREDENTIALS)
    rid = "endpoint/Guarded/variant/AllTraffic"
    dim = "sagemaker:variant:DesiredInstanceCount"
    try:
        aas.register_scalable_target(
            ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim, MinCapacity=1, MaxCapacity=2
        )
        config(smlocal, "Guarded-big", "Guarded", instance_type="ml.m5.xlarge")
        with pytest.raises(ClientError) as exc:
            smlocal.sm.update_endpoint(EndpointName="Guarded", EndpointConfigName="Guarded-big")
        assert error_of(exc) == (
            "ValidationException",
            400,
            "The variant AllTraffic of endpoint Guarded is registered with Application Auto Scaling. "
            "Deregister its scalable target before you remove the variant or change its instance type.",
        )
        assert smlocal.sm.describe_endpoint(EndpointName="Guarded")["EndpointStatus"] == "InService"
        # the same instance type (a new model, say) is allowed
        config(smlocal, "Guarded-same", "Guarded")
        smlocal.sm.update_endpoint(EndpointName="Guarded", EndpointConfigName="Guarded-same")
        assert watch(smlocal, "Guarded", lambda d: None)["EndpointConfigName"] == "Guarded-same"
        # deregistered, the instance type may change
        aas.deregister_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=dim)
        smlocal.sm.update_endpoint(EndpointName="Guarded", EndpointConfigName="Guarded-big")
        assert watch(smlocal, "Guarded", lambda d: None)["EndpointConfigName"] == "Guarded-big"
    finally:
        smlocal.cleanup("Guarded")
        drop(smlocal, "Guarded-big", "Guarded-same")
