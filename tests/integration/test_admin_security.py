"""The local attack surface: a web page the user opens must not reach smlocal.

A real server process (serve_forever, signals included; no container engine needed) on
127.0.0.1, talked to with raw HTTP as a browser would: a simple cross-site POST to the shutdown
route, and requests carrying a foreign Host header (DNS rebinding), are refused with a 403
AccessDeniedException and the server keeps serving; boto3 through 127.0.0.1 and localhost keeps
working; the shutdown route with `X-Smlocal-Admin: 1` still stops the server.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from emulator.wire.guard import is_allowed_host

CREDENTIALS = {"aws_access_key_id": "smlocal", "aws_secret_access_key": "smlocal", "region_name": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def request(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, Any, dict[str, Any]]:
    """(status, headers, JSON body) of one raw HTTP request; `Host` in headers replaces the real one."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = dict(headers or {})
        host = headers.pop("Host", None)
        conn.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        is_json = "json" in resp.headers.get("Content-Type", "")
        return resp.status, resp.headers, json.loads(data) if data and is_json else {}
    finally:
        conn.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = _free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.no_engine", str(tmp_path / "state"), str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if request(port, "GET", "/_smlocal/health")[0] == 200:
                break
        except OSError:
            pass
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        assert time.monotonic() < deadline, "the server did not answer"
        time.sleep(0.1)
    yield port, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
    log.close()


def assert_refused(answer: tuple[int, Any, dict[str, Any]], words: str) -> None:
    status, headers, body = answer
    assert status == 403, body
    assert body["__type"] == "com.amazon.coral.service#AccessDeniedException"
    assert headers["x-amzn-ErrorType"].startswith("AccessDeniedException:")
    assert headers["x-amzn-RequestId"]
    assert words in body["message"], body["message"]


def test_a_simple_cross_site_post_cannot_shut_the_server_down(
    server: tuple[int, subprocess.Popen[bytes]],
) -> None:
    port, proc = server
    answer = request(
        port,
        "POST",
        "/_smlocal/shutdown",
        b"x",
        {"Content-Type": "text/plain", "Origin": "http://evil.example", "Referer": "http://evil.example/"},
    )
    assert_refused(answer, "POST /_smlocal/shutdown needs the header X-Smlocal-Admin: 1")
    assert "Access-Control-Allow-Origin" not in answer[1]
    # a form post and a wrong header value are refused alike
    assert request(port, "POST", "/_smlocal/shutdown", b"a=b", {"X-Smlocal-Admin": "yes"})[0] == 403
    time.sleep(0.5)  # the shutdown route stops the server 50 ms after answering
    assert proc.poll() is None
    assert request(port, "GET", "/_smlocal/health")[0] == 200
    # the browser's preflight for a request with the header gets no CORS grant
    status, headers, _ = request(
        port,
        "OPTIONS",
        "/_smlocal/shutdown",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert status >= 400 and not any(h.lower().startswith("access-control-") for h in headers)


@pytest.mark.parametrize(
    "host", ["evil.example:8090", "evil.example", "127.0.0.1.evil.example", "192.168.1.20"]
)
def test_a_foreign_host_header_is_refused_on_every_api(
    server: tuple[int, subprocess.Popen[bytes]], host: str
) -> None:
    port, proc = server
    words = f"smlocal refuses requests for Host {host!r}"
    control = request(
        port,
        "POST",
        "/",
        b"{}",
        {"Host": host, "X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"},
    )
    assert_refused(control, words)
    runtime = request(port, "POST", "/endpoints/ep/invocations", b"{}", {"Host": host})
    assert_refused(runtime, words)
    assert_refused(request(port, "GET", "/_smlocal/health", headers={"Host": host}), words)
    assert_refused(request(port, "GET", "/metrics", headers={"Host": host}), words)
    shutdown = request(port, "POST", "/_smlocal/shutdown", headers={"Host": host, "X-Smlocal-Admin": "1"})
    assert_refused(shutdown, words)
    time.sleep(0.5)
    assert proc.poll() is None


def test_boto3_through_loopback_names_keeps_working_and_the_admin_header_stops_it(
    server: tuple[int, subprocess.Popen[bytes]],
) -> None:
    port, proc = server
    for url in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        sm = boto3.client("sagemaker", endpoint_url=url, **CREDENTIALS)
        assert sm.list_models()["Models"] == []
        with pytest.raises(sm.exceptions.ClientError) as info:
            sm.describe_model(ModelName="Missing")
        assert info.value.response["Error"]["Code"] == "ValidationException"
        rt = boto3.client("sagemaker-runtime", endpoint_url=url, **CREDENTIALS)
        with pytest.raises(rt.exceptions.ClientError) as info:
            rt.invoke_endpoint(EndpointName="Missing", Body=b"{}")
        assert info.value.response["Error"]["Code"] == "ValidationError"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.1.2.3", "LOCALHOST"):
        assert request(port, "GET", "/_smlocal/health", headers={"Host": host})[0] == 200, host
    status, _, body = request(port, "POST", "/_smlocal/shutdown", headers={"X-Smlocal-Admin": "1"})
    assert (status, body) == (200, {"status": "stopping"})
    assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", True),
        ("127.0.0.1:8090", True),
        ("127.255.0.9:1", True),
        ("localhost", True),
        ("LocalHost:8090", True),
        ("localhost.", True),
        ("[::1]:8090", True),
        ("[::1]", True),
        ("::1", True),
        ("myhost.lan:8090", True),  # the configured host
        ("evil.example", False),
        ("evil.example:8090", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io", False),
        ("0.0.0.0", False),
        ("[::ffff:7f00:1]", False),
        ("10.0.0.1:8090", False),
        ("", False),
    ],
)
def test_allowed_hosts(host: str, allowed: bool) -> None:
    assert is_allowed_host(host, "myhost.lan") is allowed


def test_cloudwatch_cbor_needs_its_protocol_header(server: tuple[int, subprocess.Popen[bytes]]) -> None:
    """A text/plain POST of a CBOR body would otherwise be a simple cross-site request that sets
    alarm states (and so scales endpoints)."""
    port, _ = server
    status, headers, _ = request(
        port,
        "POST",
        "/service/GraniteServiceVersion20100801/operation/DescribeAlarms",
        b"\xa0",
        {"Content-Type": "text/plain", "Origin": "http://evil.example"},
    )
    assert status == 400
    assert headers["x-amzn-query-error"] == "ValidationError;Sender"
    status, _, _ = request(
        port,
        "POST",
        "/service/GraniteServiceVersion20100801/operation/DescribeAlarms",
        b"\xa0",
        {"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"},
    )
    assert status == 200
