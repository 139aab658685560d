"""`python -m sandbox --port 8100 --db PATH`: the sandbox business services on their own."""

import argparse
from pathlib import Path

from sandbox.server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--db", type=Path, default=Path(".settled/sandbox.sqlite3"), help="the SQLite file")
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, db_path=args.db)


if __name__ == "__main__":
    main()
