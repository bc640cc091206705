"""The contract checks as pytest items (the `smlocal` pytest11 entry point).

    pytest --sagemaker-image my-model:latest [--sagemaker-model-data URL] [--sagemaker-env K=V ...]
           [--sagemaker-multi-model-data URL]  (the mme.* checks' prefix, multi-models label)
           [--sagemaker-payload FILE [--sagemaker-content-type T] [--sagemaker-accept T] ...]
           [--sagemaker-startup-timeout S] [--sagemaker-profile serverless]
           [--sagemaker-image-size-limit SIZE] [--sagemaker-streaming [--sagemaker-stream-body JSON]
           [--sagemaker-stream-content-type T]] [-k start.healthy]

adds one item per registered check, `smlocal-contract::<check id>` (select with `-k`: `-k
smlocal-contract` for all of them, `-k shutdown` for a group), next to whatever else pytest collects.
All items share one Target (one image listing, one shared healthy container), removed at session end.
An item passes on PASSED, fails on FAILED (the check's message, fix and evidence; no traceback) and on
ERROR (a bug in the checker: its traceback; or its container removed by someone else), and is
skipped on SKIPPED.

Installed with smlocal, this module is loaded by every pytest run: without --sagemaker-image it only
adds its options (and loads contract_tests.pytest_fixtures, the fixtures for a user's own tests). It
imports nothing but pytest, contract_tests.payload_options and contract_tests.preflight (the standard
library only) until the option is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

from contract_tests import preflight
from contract_tests.payload_options import (
    PAYLOAD_OPTIONS,
    PayloadOption,
    UsageError,
    payload_fields,
    stream_payload,
)

if TYPE_CHECKING:
    from contract_tests.check_config import CheckConfig
    from contract_tests.registry import Check
    from contract_tests.result import CheckResult
    from contract_tests.target import Target

#: The fixtures for a user's own tests (smlocal_server, sagemaker_clients, sagemaker_endpoint), loaded
#: with this plugin; like it, they import only pytest and the standard library until used.
pytest_plugins = ["contract_tests.pytest_fixtures"]

SUITE = "smlocal-contract"
_PLUGIN_NAME = "smlocal-contract-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("smlocal", "SageMaker hosting contract (smlocal)")
    group.addoption(
        "--sagemaker-image",
        metavar="IMAGE",
        default=None,
        help="check this local image against SageMaker's hosting contract: one item per check, "
        f"named {SUITE}::<check id>",
    )
    group.addoption(
        "--sagemaker-model-data",
        metavar="URL",
        default=None,
        help="model data for the image (s3://, file:// or a local model.tar.gz); of an image with the "
        "multi-models label also its multi-model data unless --sagemaker-multi-model-data is given",
    )
    group.addoption(
        "--sagemaker-multi-model-data",
        metavar="URL",
        default=None,
        help="the multi-model prefix (s3://bucket/models/ or a local folder of *.tar.gz) for the mme.* "
        "checks of an image with the multi-models label; --sagemaker-model-data is then the single-model "
        "data only (smlocal check's --multi-model-data)",
    )
    group.addoption(
        "--sagemaker-profile",
        choices=("realtime", "serverless"),
        default="realtime",
        help="serverless: run the serverless.* checks, and image.size fails over the image size limit "
        "(default realtime: those skipped, a warning)",
    )
    group.addoption(
        "--sagemaker-image-size-limit",
        metavar="SIZE",
        default=None,
        help="image.size's limit, e.g. 10GB, 500MB (default 10GB, SageMaker serverless' limit)",
    )
    group.addoption(
        "--sagemaker-startup-timeout",
        metavar="S",
        type=float,
        default=480.0,
        help="seconds until the first 200 from /ping (default SageMaker's 480)",
    )
    group.addoption(
        "--sagemaker-env",
        metavar="K=V",
        action="append",
        default=[],
        help="container environment variable (repeatable)",
    )
    group.addoption(
        "--sagemaker-payload",
        metavar="FILE",
        action=PayloadOption,
        help="a request body the model accepts (repeatable: invocations.serves sends each, the other "
        "invocation checks the first; default {}, and no 2xx to it is only a warning)",
    )
    group.addoption(
        "--sagemaker-content-type",
        metavar="T",
        action=PayloadOption,
        help="the content type of the --sagemaker-payload before it (default application/json)",
    )
    group.addoption(
        "--sagemaker-accept",
        metavar="T",
        action=PayloadOption,
        help="an Accept header for the --sagemaker-payload before it",
    )
    group.addoption(
        "--sagemaker-streaming",
        action="store_true",
        default=False,
        help="the image streams its answers: run the streaming.* checks (skipped without it)",
    )
    group.addoption(
        "--sagemaker-stream-body",
        metavar="JSON",
        default=None,
        help="the request the model streams an answer to: JSON text or @FILE (default a text-generation "
        "request)",
    )
    group.addoption(
        "--sagemaker-stream-content-type",
        metavar="T",
        default=None,
        help="the --sagemaker-stream-body's content type (default application/json)",
    )
    for option, metavar, text in (
        (
            "instance-type",
            "TYPE",
            "the endpoint's instance type: its memory, CPUs and GPUs, image.architecture",
        ),
        ("deploy-as", "URI", "the image reference CreateModel will get: image.registry"),
        ("region", "REGION", "the endpoint's region for image.registry (default $AWS_REGION)"),
        ("repository-access-mode", "MODE", "ImageConfig RepositoryAccessMode, Platform or Vpc"),
    ):
        group.addoption(
            f"--sagemaker-{option}",
            metavar=metavar,
            default=None,
            help=f"{text} (smlocal check's --{option})",
        )


def pytest_configure(config: pytest.Config) -> None:
    image = config.getoption("sagemaker_image", None)
    if image:
        session = ContractSession(config, image)
        session.check_config()  # bad options (an unreadable --sagemaker-payload...) stop the run now
        config.pluginmanager.register(session, _PLUGIN_NAME)


class ContractViolation(Exception):
    """Raised by an item whose check FAILED or ERRORed; repr_failure prints it without a traceback."""

    def __init__(self, result: CheckResult, text: str) -> None:
        super().__init__(result.message)
        self.result = result
        self.text = text


class ContractSession:
    """The per-run state, registered as a plugin only when --sagemaker-image is given."""

    def __init__(self, config: pytest.Config, image: str) -> None:
        self.config = config
        self.image = image
        self._target: Target | None = None
        self.warnings: list[tuple[str, str]] = []
        self._items: list[ContractItem] = []
        #: the CheckConfig the run's Target was made with (the verdict line reads it after close)
        self._checked: CheckConfig | None = None

    def check_config(self) -> CheckConfig:
        from contract_tests.check_config import SERVERLESS_IMAGE_LIMIT_BYTES, CheckConfig, parse_size
        from emulator.config import ContractLimits

        environment = {}
        for item in self.config.getoption("sagemaker_env") or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise pytest.UsageError(f"--sagemaker-env takes KEY=VALUE, got {item!r}")
            environment[key] = value
        limits = ContractLimits(startup_timeout_s=self.config.getoption("sagemaker_startup_timeout"))
        size_limit = self.config.getoption("sagemaker_image_size_limit")
        try:
            limit_bytes = parse_size(size_limit) if size_limit else SERVERLESS_IMAGE_LIMIT_BYTES
        except ValueError as exc:
            raise pytest.UsageError(f"--sagemaker-image-size-limit: {exc}") from exc
        try:
            payloads = payload_fields(
                getattr(self.config.option, PAYLOAD_OPTIONS, None) or [], "--sagemaker-"
            )
            stream = stream_payload(
                self.config.getoption("sagemaker_streaming"),
                self.config.getoption("sagemaker_stream_body"),
                self.config.getoption("sagemaker_stream_content_type"),
                "--sagemaker-",
            )
            chosen = preflight.fields(
                self.config.getoption("sagemaker_instance_type"),
                self.config.getoption("sagemaker_deploy_as"),
                self.config.getoption("sagemaker_region"),
                self.config.getoption("sagemaker_repository_access_mode"),
                os.environ,
                "--sagemaker-",
            )
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from exc
        return CheckConfig(
            image=self.image,
            model_data=self.config.getoption("sagemaker_model_data"),
            multi_model_data=self.config.getoption("sagemaker_multi_model_data"),
            profile=self.config.getoption("sagemaker_profile"),
            image_size_limit_bytes=limit_bytes,
            environment=environment,
            limits=limits,
            stream=stream,
            **payloads,
            **chosen,
        )

    def target(self) -> Target:
        """The run's Target, made by the first item that runs (all items share it)."""
        if self._target is None:
            self._target = self.new_target()
        return self._target

    def new_target(self) -> Target:
        """A Target for the image, its image and model data resolved; stops the session if it can't."""
        from contract_tests.multi_model import locate_model_data
        from contract_tests.target import Target
        from emulator.errors import EngineError, ImageNotFound, ValidationFailed
        from emulator.model.resources import ModelDataSource
        from emulator.model_data.sources import locate

        target = Target(self.check_config())
        config = self._checked = target.config
        option = "--sagemaker-model-data"
        try:
            if config.model_data is not None:  # no model data URL at all: a usage error; data
                locate_model_data(config.model_data)  # that fails: model-data.extracts
            if config.multi_model_data is not None:
                option = "--sagemaker-multi-model-data"
                locate_model_data(config.multi_model_data)
                option = "--sagemaker-model-data"
            target.image  # noqa: B018 - resolve the image now: a missing one stops the run
            if config.model_data is not None and (not target.multi_model or config.multi_model_data):
                # a prefix is model data for a multi-model image only (unless the prefix is given apart)
                locate(ModelDataSource(uri=config.model_data))
        except ImageNotFound:
            pytest.exit(
                f"smlocal: image {self.image} not found locally; build or pull it first",
                returncode=pytest.ExitCode.USAGE_ERROR,
            )
        except EngineError as exc:
            pytest.exit(f"smlocal: {exc.message}", returncode=pytest.ExitCode.USAGE_ERROR)
        except ValidationFailed as exc:
            pytest.exit(f"smlocal: {option}: {exc.message}", pytest.ExitCode.USAGE_ERROR)
        return target

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        report = yield
        if isinstance(collector, pytest.Session) and report.passed:
            report.result.append(ContractSuite.from_parent(collector, name=SUITE, nodeid=SUITE, state=self))
        return report

    def pytest_sessionstart(self) -> None:
        from contract_tests import pytest_names

        pytest_names.keep_names(self.config, SUITE)  # the terminal reporter is there by now

    def pytest_sessionfinish(self) -> None:
        if self._target is not None:
            self._target.close()
            self._target = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._items = [item for item in session.items if isinstance(item, ContractItem)]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The contract's warnings, headline warnings first (what `smlocal check`'s summary repeats:
        e.g. the model's serving was never verified), then the others, in run order."""
        loud = [
            (item.result.id, w)
            for item in self._items
            if item.result is not None
            for w in item.result.headline_warnings
        ]
        rest = [pair for pair in self.warnings if pair not in loud]
        config = self._checked
        if config is not None and preflight.wanted(config):
            results = [item.result for item in self._items if item.result is not None]
            terminalreporter.line(preflight.verdict(results, config), bold=True)
        if loud or rest:
            terminalreporter.section("smlocal contract warnings", yellow=True)
            for check_id, warning in loud:
                terminalreporter.line(f"{check_id}: {warning}", yellow=True, bold=True)
            for check_id, warning in rest:
                terminalreporter.line(f"{check_id}: {warning}")


class ContractSuite(pytest.Collector):
    """`smlocal-contract`: one ContractItem per registered check, in run order."""

    def __init__(self, *, state: ContractSession, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    def collect(self) -> Iterable[pytest.Item]:
        from contract_tests.registry import all_checks

        for check in all_checks():
            yield ContractItem.from_parent(self, name=check.id, check=check, state=self.state)


class ContractItem(pytest.Item):
    def __init__(self, *, check: Check, state: ContractSession, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.state = state
        self.result: CheckResult | None = None
        self.user_properties.append(("title", check.title))

    def runtest(self) -> None:
        from contract_tests import report
        from contract_tests.result import Outcome
        from contract_tests.runner import run_check

        result = run_check(self.check, self.state.target())
        self.result = result
        for warning in result.warnings:
            self.state.warnings.append((result.id, warning))
            self.user_properties.append(("warning", warning))
        if result.warnings:
            self.add_report_section("call", "contract warnings", "\n".join(result.warnings))
        if result.outcome is Outcome.SKIPPED:
            _skip(f"{result.id}: {result.message}")
        if result.outcome is Outcome.FAILED:
            text = report.explanation(result, self.check.fix)
            evidence = report.evidence_text(result.evidence)
            raise ContractViolation(result, f"{text}\n\nevidence:\n{_indent(evidence)}" if evidence else text)
        if result.outcome is Outcome.ERROR:
            trace = str(result.evidence.get("traceback", "")).rstrip()
            text = report.explanation(result)
            raise ContractViolation(result, f"{text}\n\n{trace}" if trace else text)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, ContractViolation):
            return excinfo.value.text  # its first line is the short summary's (-r) text
        return super().repr_failure(excinfo, style=style)

    @property
    def location(self) -> tuple[str, int | None, str]:
        # (relfspath, lineno, domain) as pytest computes it from reportinfo, but relative to no file:
        # the suite's name, whichever folder pytest runs in (pytest_names)
        return SUITE, 0, self.reportinfo()[2]

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # location "smlocal-contract" in the folder pytest was started in (line 0: pytest wants one for
        # skips reported at the item; see pytest_names), headline "image.root: the image runs as root"
        # (a domain that ends the node id would have its dots turned into "::" by the terminal reporter)
        from contract_tests import pytest_names

        return pytest_names.location(self.config, SUITE), 0, f"{self.check.id}: {self.check.title}"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _skip(reason: str) -> None:
    """pytest.skip, reported at the item ("smlocal-contract") rather than at this line of the plugin."""
    try:
        raise pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without the (private) argument
        pytest.skip(reason)
