"""leaseq.work"""
