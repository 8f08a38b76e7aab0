"""The store, without I/O: key names, the scripts and their shapes, every call and
operation, row decoding. It yields steps; ``leaseq.transport`` runs them."""
