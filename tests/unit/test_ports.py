"""The stack's ports: distinct, free, outside the range the kernel hands to outgoing connections and
port-0 binds, and claimed across processes, so none is taken between being picked and being bound by
its part."""

import socket
import subprocess
import sys

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


def test_a_port_picked_by_another_process_is_not_picked_again_while_it_may_be_starting() -> None:
    """Stacks started side by side (test groups, two test runs) pick from the same range: a port one
    process picked is claimed for all, so another does not pick it before its part listens."""
    script = (
        "from settled.runtime.stack import Ports; p = Ports.free(); "
        "print(p.api, p.temporal, p.ui, p.sandbox, p.worker_metrics)"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        for _ in range(10)
    ]
    picked = [set(map(int, run.stdout.split())) for run in runs]
    assert sum(len(ports) for ports in picked) == len(set().union(*picked)) == 50
