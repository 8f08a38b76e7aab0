"""leaseq.transport"""
