"""``python -m leaseq``: the command line (what ``leaseq worker --processes`` starts)."""

from .cli import main

main()
