"""`python -m sim [server flags]` is `agent sim serve [server flags]`; `python -m sim truth|gpus`
also works, as a shortcut to the other `agent sim` commands."""

import sys

from sim.cli import main

argv = sys.argv[1:]
sys.exit(main(argv if argv[:1] in (["serve"], ["truth"], ["gpus"]) else ["serve", *argv]))
