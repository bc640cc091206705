"""fleet/pipeline.py's Serial chain over a fake invoker (pure orchestration): what each hop is sent,
ModelLatency summed, faults carrying the latency so far."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from emulator.errors import ModelErrorResponse, ModelFault, ModelResponseTooLarge
from emulator.hosting.fleet import pipeline
from emulator.hosting.fleet.invoker import ContainerReply, FaultContext, Invoker, ResponseCap
from emulator.hosting.fleet.variants import Instance, InstanceContainer
from emulator.model.arns import Account
from emulator.runtime.base import ContainerHandle

CONTEXT = FaultContext(Account("us-east-1", "123456789012"), "e")


def instance(n: int) -> Instance:
    handles = [ContainerHandle(f"id{i}", f"c{i}", 30000 + i, {}) for i in range(n)]
    containers = tuple(InstanceContainer(f"container-{i + 1}", h) for i, h in enumerate(handles))
    return Instance("i-1", "v", handles[0], containers=containers, network=handles[0])


class FakeInvoker:
    def __init__(self, fail_at: int | None = None) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str], float | None]] = []
        self.fail_at = fail_at
        self.caps: list[Any] = []

    async def invoke(
        self,
        url: URL,
        body: bytes,
        headers: CIMultiDict[str],
        context: FaultContext,
        container: str = "primary",
        timeout_s: float | None = None,
        cap: Any = None,
    ) -> ContainerReply:
        hop = len(self.sent)
        self.caps.append(cap)
        self.sent.append((container, body, dict(headers), timeout_s))
        if hop == self.fail_at:
            fault = context.fault(ModelErrorResponse, 500, "no", container)
            fault.model_latency_s = 0.5
            raise fault
        return ContainerReply(200, body + b">", f"type/{hop}", {"X-Hop": str(hop)}, 0.1 * (hop + 1))


def run(invoker: FakeInvoker, n: int, headers: dict[str, str]) -> ContainerReply:
    coro = pipeline.call_serial(invoker, instance(n), b"in", CIMultiDict(headers), CONTEXT, 60.0)  # type: ignore[arg-type]
    return asyncio.run(coro)


def test_each_hop_gets_the_previous_answer_and_its_content_type_and_only_the_last_the_accept() -> None:
    invoker = FakeInvoker()
    reply = run(
        invoker, 3, {"Content-Type": "a/b", "Accept": "x/y", "X-Amzn-SageMaker-Custom-Attributes": "k=v"}
    )
    bodies = [s[1] for s in invoker.sent]
    assert bodies == [b"in", b"in>", b"in>>"] and reply.body == b"in>>>"
    assert [s[2].get("Content-Type") for s in invoker.sent] == ["a/b", "type/0", "type/1"]
    assert [s[2].get("Accept") for s in invoker.sent] == [None, None, "x/y"]
    assert all(s[2]["X-Amzn-SageMaker-Custom-Attributes"] == "k=v" for s in invoker.sent)
    assert [s[0] for s in invoker.sent] == ["container-1", "container-2", "container-3"]
    assert reply.elapsed_s == pytest.approx(0.1 + 0.2 + 0.3)  # ModelLatency: the sum
    assert reply.content_type == "type/2" and reply.passed_back == {"X-Hop": "2"}
    budgets: list[Any] = [s[3] for s in invoker.sent]
    assert all(0 < b <= 60.0 for b in budgets) and budgets == sorted(budgets, reverse=True)


def test_a_failing_hop_carries_the_latency_so_far_and_is_never_retried_elsewhere() -> None:
    invoker = FakeInvoker(fail_at=1)
    with pytest.raises(ModelFault) as info:
        run(invoker, 3, {})
    assert "from container-2" in info.value.message
    assert info.value.model_latency_s == pytest.approx(0.1 + 0.5)
    assert info.value.__cause__ is None  # the invoke path retries only a first hop's refused connect
    assert len(invoker.sent) == 2


def test_every_hop_but_the_last_is_capped_at_5_mb_with_the_pipeline_text() -> None:
    """The cap goes to the invoker (which reads within it), so an intermediate answer of any size,
    over the client's 6 MB cap too, gets the pipeline's text naming both containers."""
    invoker = FakeInvoker()
    run(invoker, 3, {})
    caps = invoker.caps
    assert caps[2] is None and all(c.max_bytes == 5 * 1024 * 1024 for c in caps[:2])
    fault = caps[1].fault(200, 7_000_000, True)
    assert isinstance(fault, ModelResponseTooLarge) and fault.original_status == 200
    assert fault.message == (
        "Received response from container-2 with status code 200. However, the request payload from "
        "container-2 to container-3 is 7000000 bytes, which has exceeded the maximum limit of 5 MB."
    )
    assert caps[0].fault(201, 5_300_000, False).message == (
        "Received response from container-1 with status code 201. However, the request payload from "
        "container-1 to container-2 is at least 5300000 bytes, which has exceeded the maximum limit of 5 MB."
    )


def test_the_invoker_reads_a_chunked_answer_only_up_to_the_cap() -> None:
    """A real server answering 7 MiB chunked: the invoker stops past the cap (5 MiB + one read kept)
    and raises the cap's own fault, 'at least' the bytes it read."""
    cap_bytes = 5 * 1024 * 1024

    async def big(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(7 * 16):
            await resp.write(b"x" * 65536)
        await resp.write_eof()
        return resp

    seen: list[tuple[int, int, bool]] = []

    def fault(status: int, size: int, exact: bool) -> ModelFault:
        seen.append((status, size, exact))
        return ModelResponseTooLarge("too big", status, "too big", "arn")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/invocations", big)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        invoker = Invoker(6_291_456, 30.0)
        await invoker.start()
        try:
            with pytest.raises(ModelResponseTooLarge):
                await invoker.invoke(
                    URL(f"http://127.0.0.1:{port}/invocations"),
                    b"in",
                    CIMultiDict(),
                    CONTEXT,
                    "first",
                    cap=ResponseCap(cap_bytes, fault),
                )
        finally:
            await invoker.close()
            await runner.cleanup()

    asyncio.run(main())
    [(status, size, exact)] = seen
    assert status == 200 and not exact and cap_bytes < size <= cap_bytes + 2**17
