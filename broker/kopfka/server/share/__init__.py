"""Share-partitions on their leaders (KIP-932): acquisition, acknowledgement, share sessions."""
