"""The master port a launch hands its ranks: free now, and out of the pool the kernel hands out
meanwhile (its ephemeral range), so no other connection or listener takes it before rank 0
binds it after importing torch."""

from __future__ import annotations

import socket

from explorer.processes import ranks
from explorer.processes.ranks import free_port


def test_the_port_is_below_the_ephemeral_range_and_free():
    low = ranks._ephemeral_low()
    assert low is not None  # Linux says where its range starts
    ports = {free_port() for _ in range(20)}
    assert all(low - ranks._BELOW <= p < low for p in ports)
    assert len(ports) > 1  # drawn at random: two launches at once rarely meet
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))  # nothing holds it


def test_a_port_something_listens_on_is_not_free():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        assert not ranks._bindable(held.getsockname()[1])


def test_without_room_below_the_range_an_ephemeral_port_is_used(monkeypatch):
    monkeypatch.setattr(ranks, "_ephemeral_low", lambda: 1024)
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
    monkeypatch.setattr(ranks, "_ephemeral_low", lambda: None)
    assert free_port() > 0
