"""The stack's ports: distinct, free, and outside the range the kernel hands to outgoing connections
and port-0 binds, so none is taken between being picked and being bound by its part."""

import socket

from settled.runtime.stack import Ports, _ephemeral_low, free_port


def test_the_stack_gets_five_distinct_free_ports_below_the_ephemeral_range() -> None:
    ports = Ports.free()
    chosen = [ports.api, ports.temporal, ports.ui, ports.sandbox, ports.worker_metrics]
    assert len(set(chosen)) == 5
    assert all(port < _ephemeral_low() for port in chosen)
    for port in chosen:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: raises if something holds it


def test_a_taken_port_is_never_picked_again() -> None:
    first = free_port()
    assert all(free_port(frozenset({first})) != first for _ in range(50))
