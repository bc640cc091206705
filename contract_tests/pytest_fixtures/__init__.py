"""pytest fixtures for a user's own test suite, served by the installed `smlocal` pytest11 plugin.

    def test_predict(sagemaker_endpoint, sagemaker_clients):
        name = sagemaker_endpoint("my-model:latest", model_data="file:///abs/model.tar.gz")
        out = sagemaker_clients.runtime.invoke_endpoint(EndpointName=name, Body=b"{}",
                                                        ContentType="application/json")

Fixtures:
    smlocal_server      (session) a `smlocal serve` of its own on a free 127.0.0.1 port with a temporary
                        state dir, stopped at the end with its containers (only its own); or the
                        running server named by --smlocal-url / SMLOCAL_URL (neither started nor
                        stopped). `.url`, `.region`, `.state_dir` (None when external), `.owner`.
    sagemaker_clients   (session) boto3 clients for it: `.sagemaker`, `.runtime`, `.autoscaling`,
                        `.cloudwatch` (no retries; the environment's keys or dummy ones).
    sagemaker_endpoint  (function) `sagemaker_endpoint(image, model_data=None, **options)` -> the name
                        of an InService endpoint, deleted (with its config and models) at teardown.
                        When the test fails, the endpoint's container logs are a section of its report
                        (and the asynchronous results smlocal could not write to S3, one of their own).

Options: --smlocal-url URL, --smlocal-region R, --smlocal-serve-arg=ARG (repeatable; ini
`smlocal_serve_args`), --smlocal-start-timeout S. Marker: `smlocal_reuse_endpoints` (module or class):
the same factory call returns the same endpoint, made once and deleted when the module ends.

Loaded by contract_tests.plugin; imports only pytest and the standard library until a fixture runs.
docs/quickstart-pytest.md is the user's page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from contract_tests.pytest_fixtures.clients import SageMakerClients
    from contract_tests.pytest_fixtures.endpoints import (
        ContainerOptions,
        Endpoint,
        EndpointFactory,
        VariantOptions,
    )
    from contract_tests.pytest_fixtures.server import SmlocalServer

REUSE_MARKER = "smlocal_reuse_endpoints"
URL_ENV = "SMLOCAL_URL"
#: item.stash: (server URL, endpoint name) of every endpoint a test used, for its failure report.
_USED = pytest.StashKey[list[tuple[str, str]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("smlocal-fixtures", "smlocal fixtures (smlocal_server, sagemaker_endpoint)")
    group.addoption(
        "--smlocal-url",
        metavar="URL",
        default=None,
        help=f"use the smlocal server running at URL instead of starting one (default ${URL_ENV})",
    )
    group.addoption(
        "--smlocal-region",
        metavar="REGION",
        default=None,
        help="the region of the started server and of the clients (default $AWS_REGION, "
        "$AWS_DEFAULT_REGION, else us-east-1)",
    )
    group.addoption(
        "--smlocal-serve-arg",
        metavar="ARG",
        action="append",
        default=[],
        help="an extra `smlocal serve` argument for the started server, repeatable: "
        "--smlocal-serve-arg=--time-scale=10 (after the ini's smlocal_serve_args)",
    )
    group.addoption(
        "--smlocal-start-timeout",
        metavar="S",
        type=float,
        default=60.0,
        help="seconds the started server has to answer (default 60)",
    )
    parser.addini(
        "smlocal_serve_args",
        type="args",
        default=[],
        help="extra `smlocal serve` arguments for the server smlocal_server starts",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{REUSE_MARKER}: in this module (or class), sagemaker_endpoint calls with the same arguments "
        "share one endpoint, created once and deleted at the module's end",
    )


def _region(config: pytest.Config) -> str:
    chosen = config.getoption("smlocal_region")
    return str(chosen or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")


@pytest.fixture(scope="session")
def smlocal_server(pytestconfig: pytest.Config) -> Iterator[SmlocalServer]:
    """The smlocal server of this test session (see the module docstring)."""
    from contract_tests.pytest_fixtures.server import ServerStartError, external_server, start_server

    url = pytestconfig.getoption("smlocal_url") or os.environ.get(URL_ENV)
    region = _region(pytestconfig)
    try:
        if url:
            server = external_server(url, region)
        else:
            extra = [*pytestconfig.getini("smlocal_serve_args"), *pytestconfig.getoption("smlocal_serve_arg")]
            server = start_server(region, extra, timeout_s=pytestconfig.getoption("smlocal_start_timeout"))
    except ServerStartError as exc:
        pytest.fail(f"smlocal_server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sagemaker_clients(smlocal_server: SmlocalServer) -> Iterator[SageMakerClients]:
    """boto3 sagemaker / sagemaker-runtime / application-autoscaling / cloudwatch clients of the server."""
    from contract_tests.pytest_fixtures.clients import make_clients

    clients = make_clients(smlocal_server.url, smlocal_server.region)
    try:
        yield clients
    finally:
        clients.close()


class SageMakerEndpointFactory(Protocol):
    """The `sagemaker_endpoint` fixture's type, for annotations in a user's tests."""

    def __call__(
        self,
        image: str | None = None,
        model_data: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        instance_count: int = 1,
        instance_type: str = "ml.m5.large",
        variants: Sequence[VariantOptions] | None = None,
        containers: Sequence[ContainerOptions] | None = None,
        inference_execution_mode: str | None = None,
        multi_model: bool = False,
        serverless: Mapping[str, Any] | None = None,
        async_config: Mapping[str, Any] | None = None,
        execution_role_arn: str = "arn:aws:iam::123456789012:role/smlocal",
        model_options: Mapping[str, Any] | None = None,
        config_options: Mapping[str, Any] | None = None,
        timeout_s: float = 600.0,
    ) -> Endpoint: ...


class _Deployer:
    """The callable the `sagemaker_endpoint` fixture returns (SageMakerEndpointFactory)."""

    def __init__(
        self, request: pytest.FixtureRequest, factory: EndpointFactory, server: SmlocalServer
    ) -> None:
        self._request = request
        self._factory = factory
        self._server = server

    def __call__(self, image: str | None = None, model_data: str | None = None, **options: Any) -> Endpoint:
        from contract_tests.pytest_fixtures.endpoints import (
            DEFAULT_TIMEOUT_S,
            DeploymentFailed,
            build_request,
        )

        timeout_s = float(options.pop("timeout_s", DEFAULT_TIMEOUT_S))
        endpoint_request = build_request(image, model_data, **options)
        node = self._request.node
        factory = self._factory
        cache: dict[str, Endpoint] | None = None
        key = ""
        if node.get_closest_marker(REUSE_MARKER) is not None:
            factory, cache = self._request.getfixturevalue("_smlocal_module_endpoints")
            key = json.dumps(asdict(endpoint_request), sort_keys=True, default=str)
            if key in cache:
                self._used(cache[key])
                return cache[key]
        failure = ""
        try:
            endpoint = factory.create(endpoint_request, timeout_s)
        except DeploymentFailed as exc:
            failure = str(exc)
        if failure:  # outside the except: the report shows the reason once, with no exception chain
            pytest.fail(failure, pytrace=False)
        if cache is not None:
            cache[key] = endpoint
        self._used(endpoint)
        return endpoint

    def _used(self, endpoint: Endpoint) -> None:
        self._request.node.stash.setdefault(_USED, []).append((self._server.url, str(endpoint)))


def _factory(clients: SageMakerClients, server: SmlocalServer, test_name: str) -> EndpointFactory:
    from contract_tests.pytest_fixtures.endpoints import LOG_TAIL_LINES, EndpointFactory
    from contract_tests.pytest_fixtures.server import endpoint_logs

    return EndpointFactory(
        sagemaker=clients.sagemaker,
        logs=lambda name: endpoint_logs(server.url, name, tail=LOG_TAIL_LINES),
        test_name=test_name,
    )


def _teardown(factory: EndpointFactory) -> None:
    problems = factory.cleanup()
    if problems:
        pytest.fail("sagemaker_endpoint teardown: " + "; ".join(problems), pytrace=False)


@pytest.fixture
def sagemaker_endpoint(
    request: pytest.FixtureRequest, sagemaker_clients: SageMakerClients, smlocal_server: SmlocalServer
) -> Iterator[SageMakerEndpointFactory]:
    """A factory of InService endpoints, deleted at teardown (see the module docstring)."""
    factory = _factory(sagemaker_clients, smlocal_server, request.node.name)
    try:
        yield _Deployer(request, factory, smlocal_server)
    finally:
        _teardown(factory)


@pytest.fixture(scope="module")
def _smlocal_module_endpoints(
    request: pytest.FixtureRequest, sagemaker_clients: SageMakerClients, smlocal_server: SmlocalServer
) -> Iterator[tuple[EndpointFactory, dict[str, Endpoint]]]:
    """The endpoints a `smlocal_reuse_endpoints` module shares, by call; deleted at its end."""
    factory = _factory(sagemaker_clients, smlocal_server, request.module.__name__.rsplit(".", 1)[-1])
    try:
        yield factory, {}
    finally:
        _teardown(factory)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report gets a section of container logs per endpoint it used, after one that
    lists the endpoint's asynchronous results the server could not write to S3, if any."""
    report = yield
    used = item.stash.get(_USED, [])
    if report.failed and report.when == "call" and used:
        from contract_tests.pytest_fixtures.endpoints import LOG_TAIL_LINES
        from contract_tests.pytest_fixtures.server import endpoint_logs
        from emulator.model.messages.async_inference import RESULT_NOT_WRITTEN

        for url, name in dict.fromkeys(used):
            text = endpoint_logs(url, name, tail=LOG_TAIL_LINES) or "(no logs)"
            # asynchronous results the server could not write to S3: the test waited for nothing
            lost = [line for line in text.splitlines() if RESULT_NOT_WRITTEN in line]
            if lost:
                report.sections.append(
                    (f"smlocal: asynchronous results NOT written to S3: {name}", "\n".join(lost))
                )
            report.sections.append((f"smlocal container logs: {name}", text))
    return report
