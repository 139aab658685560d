"""What every `settled` command line shares: help that shows each flag's default, and errors that
begin `settled:` (standard library only: a command's start stays light)."""

import argparse
import sys
from typing import NoReturn


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each flag's default at the end of its help, when it has one worth saying (not None, False or
    empty) and the help does not say it already; descriptions keep their own line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default is argparse.SUPPRESS:
            return text
        if default == [] or not (action.option_strings or action.nargs in ("?", "*")):
            return text
        return f"{text} (default: %(default)s)"

    def _format_action(self, action: argparse.Action) -> str:
        text = super()._format_action(action)
        if isinstance(action, argparse._SubParsersAction):
            text = text.split("\n", 1)[1]  # the commands, without their metavar's line above them
        return text


class Parser(argparse.ArgumentParser):
    """An argparse parser whose help shows defaults and whose usage errors begin `settled:`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        command = self.prog.removeprefix("settled").strip()
        self.exit(2, f"settled: {command + ': ' if command else ''}{message}\n")
