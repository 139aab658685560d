"""localstripe on one loopback port, its objects in memory only.

`localstripe --port P` listens on every interface (`::`) and pickles its whole store into the fixed
file /tmp/localstripe.pickle after every write, shared by every instance on the machine. The tests run
the same aiohttp app on 127.0.0.1 with the dump turned off: `python -m tests.services.localstripe_loopback
--port P`.
"""

import argparse
import socket

from aiohttp import web
from localstripe import resources, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    def _no_dump(_store: resources.Store) -> None:
        return None

    resources.Store.dump_to_disk = _no_dump  # type: ignore[method-assign]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    web.run_app(server.app, sock=sock, access_log=None, print=None)


if __name__ == "__main__":
    main()
