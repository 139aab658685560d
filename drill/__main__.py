"""`python -m drill`: the same command as `settled drill`."""

import argparse
import sys

from drill.cli import add_arguments, run

parser = argparse.ArgumentParser(
    prog="settled drill", description="cut the same task at every dangerous moment"
)
add_arguments(parser)
sys.exit(run(parser.parse_args()))
