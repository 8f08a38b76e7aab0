"""leaseq.store"""
