"""``python -m leaseq.cli``: the command line, as ``python -m leaseq``."""

from leaseq.cli.main import main

main()
