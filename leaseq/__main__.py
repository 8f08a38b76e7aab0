"""``python -m leaseq``: the command line (what ``leaseq worker --processes`` starts)."""

from leaseq.cli.main import main

main()
