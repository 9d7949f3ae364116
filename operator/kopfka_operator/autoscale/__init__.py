"""Broker autoscaling (issue 15): samples of the brokers' load (`metrics`), and the policy that
turns a history of them into a broker count and a reason (`policy`). The operator's timer and
the safe scale paths use them; nothing here talks to Kubernetes."""
