"""The listening socket of the admin and HTTP doors says TCP, so asyncio turns Nagle off on the
connections it accepts (else each keep-alive response waits ~40 ms for a delayed ACK)."""

from __future__ import annotations

import socket

from gateway.admin.server import _listen


def test_the_listening_socket_is_tcp_by_protocol_so_accepted_ones_get_nodelay() -> None:
    sock = _listen("127.0.0.1", 0, "test", "--port")
    try:
        assert sock.proto == socket.IPPROTO_TCP
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        assert accepted.proto == socket.IPPROTO_TCP  # what asyncio checks before setting TCP_NODELAY
        accepted.close()
        client.close()
    finally:
        sock.close()


def test_a_taken_port_is_one_clear_error() -> None:
    taken = _listen("127.0.0.1", 0, "test", "--port")
    try:
        port = taken.getsockname()[1]
        try:
            _listen("127.0.0.1", port, "HTTP ways in", "api.port")
        except Exception as exc:
            assert "cannot listen on 127.0.0.1" in str(exc) and "api.port" in str(exc)
        else:
            raise AssertionError("a second listen on a taken port succeeded")
    finally:
        taken.close()
