"""emulator.model.store.Registry, emulator.model.arns.Account and the exact texts of messages."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from emulator.model import messages
from emulator.model.arns import Account
from emulator.model.store import Registry

ACCOUNT = Account("us-east-1", "123456789012")


@dataclass(frozen=True)
class Thing:
    name: str
    value: int = 0


# ------------------------------------------------------------------------------------ Registry


def make() -> Registry[Thing]:
    reg: Registry[Thing] = Registry()
    for n, name in enumerate(["Zeta", "alpha", "MyEndpoint", "beta"]):
        reg.put(Thing(name, n))
    return reg


def test_contains_and_get_are_case_insensitive() -> None:
    reg = make()
    for name in ("MyEndpoint", "myendpoint", "MYENDPOINT", "myEndPoint"):
        assert name in reg
        found = reg.get(name)
        assert found is not None and found.name == "MyEndpoint"
    assert "nope" not in reg
    assert reg.get("nope") is None


def test_get_exact_is_case_sensitive() -> None:
    reg = make()
    assert reg.get_exact("MyEndpoint") == Thing("MyEndpoint", 2)
    assert reg.get_exact("myendpoint") is None
    assert reg.get_exact("MYENDPOINT") is None
    assert reg.get_exact("missing") is None


def test_iteration_is_sorted_by_name_and_len_counts() -> None:
    reg = make()
    assert [t.name for t in reg] == sorted(["Zeta", "alpha", "MyEndpoint", "beta"])
    assert len(reg) == 4


def test_put_same_name_other_case_replaces() -> None:
    reg = make()
    reg.put(Thing("ALPHA", 99))
    assert len(reg) == 4
    assert reg.get("alpha") == Thing("ALPHA", 99)
    assert reg.get_exact("alpha") is None


def test_remove_is_case_insensitive_and_returns_the_item() -> None:
    reg = make()
    assert reg.remove("myENDPOINT") == Thing("MyEndpoint", 2)
    assert "MyEndpoint" not in reg
    assert len(reg) == 3
    assert reg.remove("MyEndpoint") is None


# --------------------------------------------------------------------------------------- ARNs


def test_arns_lower_case_the_name() -> None:
    assert (
        ACCOUNT.endpoint_arn("MyEndpoint") == "arn:aws:sagemaker:us-east-1:123456789012:endpoint/myendpoint"
    )
    assert ACCOUNT.model_arn("My-Model") == "arn:aws:sagemaker:us-east-1:123456789012:model/my-model"
    assert (
        ACCOUNT.endpoint_config_arn("Cfg-A")
        == "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/cfg-a"
    )
    assert (
        Account("eu-west-1", "000000000000").arn("model", "X")
        == "arn:aws:sagemaker:eu-west-1:000000000000:model/x"
    )


def test_log_group_keeps_the_name_case() -> None:
    assert ACCOUNT.log_group("MyEndpoint") == "/aws/sagemaker/Endpoints/MyEndpoint"
    assert (
        ACCOUNT.log_group_arn("MyEndpoint")
        == "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/MyEndpoint"
    )


def test_console_logs_url() -> None:
    assert ACCOUNT.console_logs_url("NAME") == (
        "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
        "#logEventViewer:group=/aws/sagemaker/Endpoints/NAME"
    )


# ----------------------------------------------------------------------------------- messages


def test_not_found_texts() -> None:
    arn = ACCOUNT.endpoint_arn("MyEndpoint")
    assert (
        messages.not_found("endpoint", arn)
        == 'Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/myendpoint".'
    )
    assert messages.not_found("model", ACCOUNT.model_arn("m")) == (
        'Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/m".'
    )
    assert messages.not_found("endpoint-config", ACCOUNT.endpoint_config_arn("C")) == (
        'Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/c".'
    )


def test_already_exists_texts() -> None:
    arn = ACCOUNT.endpoint_config_arn("Cfg")
    assert messages.already_exists("endpoint-config", arn) == (
        "Cannot create already existing endpoint configuration "
        '"arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/cfg".'
    )
    assert messages.already_exists("model", ACCOUNT.model_arn("M")) == (
        'Cannot create already existing model "arn:aws:sagemaker:us-east-1:123456789012:model/m".'
    )
    assert messages.already_exists("endpoint", ACCOUNT.endpoint_arn("E")) == (
        'Cannot create already existing endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e".'
    )


def test_in_progress_text() -> None:
    assert messages.in_progress(ACCOUNT.endpoint_arn("E1")) == (
        'Cannot update in-progress endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e1".'
    )


def test_runtime_endpoint_not_found_keeps_the_name_as_given() -> None:
    assert messages.runtime_endpoint_not_found("MyEndpoint", "123456789012") == (
        "Endpoint MyEndpoint of account 123456789012 not found."
    )


def test_model_error_client_404() -> None:
    url = ACCOUNT.console_logs_url("ep")
    assert messages.model_error(404, "no such thing", url, "123456789012") == (
        'Received client error (404) from primary with message "no such thing". '
        f"See {url} in account 123456789012 for more information."
    )


@pytest.mark.parametrize("status", [500, 503, 0])
def test_model_error_server_and_zero(status: int) -> None:
    url = ACCOUNT.console_logs_url("ep")
    text = messages.model_error(status, "boom", url, "123456789012")
    assert text.startswith(f'Received server error ({status}) from primary with message "boom". ')
    assert text.endswith(f"See {url} in account 123456789012 for more information.")


@pytest.mark.parametrize("status", [400, 499])
def test_model_error_client_bounds(status: int) -> None:
    assert messages.model_error(status, "x", "u", "1").startswith(
        f"Received client error ({status}) from primary"
    )


def test_model_error_names_the_container() -> None:
    assert " from container-2 with message" in messages.model_error(
        500, "x", "u", "1", container="container-2"
    )


def test_invocation_timed_out_text() -> None:
    assert messages.invocation_timed_out() == (
        "Your invocation timed out while waiting for a response from container primary. "
        "Review the latency metrics for each container in Amazon CloudWatch, resolve the issue, "
        "and try again."
    )


def test_startup_failure_texts() -> None:
    assert messages.ping_health_check_failed("AllTraffic") == (
        "The primary container for production variant AllTraffic did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )
    assert messages.cannot_start_container("v1") == (
        "CannotStartContainerError. Please ensure the model container for variant v1 starts correctly "
        "when invoked with 'docker run <image> serve'"
    )


def test_request_too_large_text() -> None:
    assert messages.request_too_large(6291456) == "HTTP content length exceeded 6291456 bytes."
