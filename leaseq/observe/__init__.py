"""leaseq.observe"""
