"""kopfka: a Kafka-wire-compatible broker written in Python."""
__version__ = "0.1.0"
