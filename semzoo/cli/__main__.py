"""``python -m semzoo.cli``: the console entry point."""

from semzoo.cli import main

main()
