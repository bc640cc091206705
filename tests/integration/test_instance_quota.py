"""The account's instance quota (`smlocal serve --instance-quota`), through unchanged boto3 clients
against real echo containers: CreateEndpoint, UpdateEndpoint, UpdateEndpointWeightsAndCapacities and
autoscaling past it answer SageMaker's ResourceLimitExceeded (400) with its words, before anything
starts; below it everything is accepted. (Before the quota, InitialInstanceCount 100 started 100
containers.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.scaling import NS, resource, variant_target, wait_for
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker

TYPE = "ml.m5.large"


def exceeded(limit: int, current: int, delta: int, instance_type: str = TYPE) -> tuple[str, int, str]:
    return (
        "ResourceLimitExceeded",
        400,
        f"The account-level service limit '{instance_type} for endpoint usage' is {limit} Instances, with "
        f"current utilization of {current} Instances and a request delta of {delta} Instances. Please use "
        "AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, "
        "contact AWS support to request an increase for this quota.",
    )


@pytest.fixture(scope="module")
def quota_server(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(
        tmp_path_factory.mktemp("quota"),
        echo_image,
        instance_quota=20,
        instance_quota_by_type=((TYPE, 3),),
    )
    try:
        yield env
    finally:
        env.server.stop()


def config(env: Smlocal, name: str, count: int, model: str = "quota") -> None:
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": TYPE,
            }
        ],
    )


def refused(call: Any, **kwargs: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0  # a 400: never retried
    return error_of(info)


def test_every_way_past_the_quota_is_resource_limit_exceeded(quota_server: Smlocal) -> None:
    env = quota_server
    sm = env.sm
    sm.create_model(ModelName="quota", PrimaryContainer={"Image": env.image})
    config(env, "quota-2", 2)
    config(env, "quota-100", 100)
    config(env, "quota-4", 4)
    try:
        # InitialInstanceCount 100: refused before anything starts (it started 100 containers)
        assert refused(sm.create_endpoint, EndpointName="q-big", EndpointConfigName="quota-100") == exceeded(
            3, 0, 100
        )
        assert sm.list_endpoints()["Endpoints"] == []
        sm.create_endpoint(EndpointName="q-a", EndpointConfigName="quota-2")
        assert env.wait("q-a")["EndpointStatus"] == "InService"
        # another endpoint: 2 held, 2 more asked
        assert refused(sm.create_endpoint, EndpointName="q-b", EndpointConfigName="quota-2") == exceeded(
            3, 2, 2
        )
        # UpdateEndpointWeightsAndCapacities: the variant's new count less what it holds
        desired = [{"VariantName": "AllTraffic", "DesiredInstanceCount": 4}]
        assert refused(
            sm.update_endpoint_weights_and_capacities, EndpointName="q-a", DesiredWeightsAndCapacities=desired
        ) == exceeded(3, 2, 2)
        # UpdateEndpoint: the new config's steady state less what the endpoint holds
        assert refused(sm.update_endpoint, EndpointName="q-a", EndpointConfigName="quota-4") == exceeded(
            3, 2, 2
        )
        assert sm.describe_endpoint(EndpointName="q-a")["EndpointStatus"] == "InService"
        # within the quota: accepted
        desired = [{"VariantName": "AllTraffic", "DesiredInstanceCount": 3}]
        sm.update_endpoint_weights_and_capacities(EndpointName="q-a", DesiredWeightsAndCapacities=desired)
        described = _in_service(env, "q-a")
        assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 3
        # autoscaling: a MinCapacity above the count scales out through the same check; the activity
        # fails with SageMaker's text and the endpoint keeps its 3 instances
        aas = boto3.client(
            "application-autoscaling",
            endpoint_url=env.server.url,
            config=Config(retries={"mode": "standard", "max_attempts": 1}),
            **CREDENTIALS,
        )
        rid = resource("q-a")
        aas.register_scalable_target(**variant_target(rid), MinCapacity=5, MaxCapacity=6)

        def finished() -> list[dict[str, Any]]:
            acts = aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=rid)["ScalingActivities"]
            return [a for a in acts if a["StatusCode"] in ("Failed", "Successful")]

        (activity,) = wait_for("the scale-out activity to end", finished, 30)
        assert activity["StatusCode"] == "Failed", activity
        assert activity["StatusMessage"] == (
            f"Failed to set desired instance count to 5. Reason: {exceeded(3, 3, 2)[2]}"
        )
        assert _in_service(env, "q-a")["ProductionVariants"][0]["CurrentInstanceCount"] == 3
        aas.deregister_scalable_target(**variant_target(rid))
    finally:
        env.cleanup("q-a")
        for name in ("quota-2", "quota-100", "quota-4"):
            sm.delete_endpoint_config(EndpointConfigName=name)
        sm.delete_model(ModelName="quota")


def _in_service(env: Smlocal, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        described: dict[str, Any] = env.sm.describe_endpoint(EndpointName=name)
        return described if described["EndpointStatus"] == "InService" else None

    found: dict[str, Any] = wait_for(f"{name} InService", done, 30)
    return found


def test_the_default_quota_refuses_100_instances(quota_server: Smlocal) -> None:
    """Another type keeps the default (here 20): 100 instances of it are refused too."""
    sm = quota_server.sm
    sm.create_model(ModelName="quota-other", PrimaryContainer={"Image": quota_server.image})
    sm.create_endpoint_config(
        EndpointConfigName="quota-other",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "quota-other",
                "InitialInstanceCount": 100,
                "InstanceType": "ml.c5.xlarge",
            }
        ],
    )
    try:
        assert refused(
            sm.create_endpoint, EndpointName="q-other", EndpointConfigName="quota-other"
        ) == exceeded(20, 0, 100, "ml.c5.xlarge")
    finally:
        sm.delete_endpoint_config(EndpointConfigName="quota-other")
        sm.delete_model(ModelName="quota-other")
