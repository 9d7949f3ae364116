"""Cluster security run by the operator: its certificate authorities, the nodes' and its own
certificates (`certificates`), the operator's credentials towards a secured cluster
(`credentials`), and User resources reconciled into SCRAM credentials and ACLs (`users`)."""
