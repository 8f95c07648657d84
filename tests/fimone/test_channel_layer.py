"""The Redis channel layer (pub/sub) as the servers use it: an idle socket keeps its consumer, a
burst is not dropped, a crowd of sockets subscribes at once, a closed socket's consumer ends."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


@pytest.mark.redis
def test_an_idle_receive_outlasts_the_blocking_pop_without_a_timeout_error() -> None:
    async def scenario() -> str:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        try:
            await asyncio.wait_for(layer.receive(channel), timeout=7)
        except TimeoutError as error:
            # ``asyncio.wait_for`` gave up (the wanted outcome) — not redis' "Timeout reading".
            return "waited" if not str(error) else f"redis: {error}"
        return "received"

    assert async_to_sync(scenario)() == "waited"


@pytest.mark.redis
def test_a_burst_to_a_busy_server_process_is_not_dropped() -> None:
    """A busy server streaming many runs must not lose events (the list-based layer dropped what
    was over one process's queue capacity, silently)."""

    async def scenario() -> int:
        layer = get_channel_layer()
        sockets = [await layer.new_channel() for _ in range(3)]
        for channel in sockets:
            await layer.group_add("burst", channel)
        for n in range(150):  # 450 messages wait for this one process before it reads any
            await layer.group_send("burst", {"type": "run.event", "n": n})
        received = 0
        for channel in sockets:
            for _ in range(150):
                await asyncio.wait_for(layer.receive(channel), timeout=5)
                received += 1
        for channel in sockets:
            await layer.group_discard("burst", channel)
        return received

    assert async_to_sync(scenario)() == 450


@pytest.mark.redis
def test_many_sockets_subscribing_at_once_all_get_their_subscription() -> None:
    """A server process whose sockets all open at once (a page reload on 200 screens): every one
    gets its subscription (the list-based layer once ran out of pooled connections here)."""

    async def scenario() -> int:
        layer = get_channel_layer()
        channels = [await layer.new_channel() for _ in range(250)]
        await asyncio.gather(*(layer.group_add("crowd", channel) for channel in channels))
        await layer.group_send("crowd", {"type": "hello"})
        received = await asyncio.gather(*(asyncio.wait_for(layer.receive(c), 10) for c in channels))
        await asyncio.gather(*(layer.group_discard("crowd", channel) for channel in channels))
        return len(received)

    assert async_to_sync(scenario)() == 250


@pytest.mark.redis
def test_a_receive_cancelled_at_any_moment_stops() -> None:
    """A closing socket cancels its consumer's receive. With a socket timeout, redis-py sends
    each command inside ``asyncio.wait_for``, which on Python 3.11 loses a cancellation landing
    as the send completes, and the receive went on popping forever (a consumer and a connection
    leaked per close; a test process never exited). Cancelled at 400 moments of its first
    commands, every receive must stop at once."""
    layer = get_channel_layer()
    stuck: list[asyncio.Task] = []

    async def cancel_after(delay: float) -> bool:
        channel = await layer.new_channel()
        receive = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(delay)
        receive.cancel()
        done, _ = await asyncio.wait([receive], timeout=2)
        if not done:
            stuck.append(receive)
        return bool(done) and receive.cancelled()

    async def scenario() -> list[float]:
        delays = [n / 40_000 for n in range(400)]  # 0 to 10 ms, in steps of 25 µs
        try:
            return [delay for delay in delays if not await cancel_after(delay)]
        finally:
            if stuck:  # end them by closing their connections, so the test reports, not hangs
                await layer.close_pools()
                await asyncio.wait(stuck, timeout=5)

    assert async_to_sync(scenario)() == []
