"""Run confluent_kafka.kafkatest's verifiable producer/consumer (Kafka's system-test clients).

The shipped scripts import their helper as a top-level module and call the Python 2
`dict.iteritems()`; this runner puts their directory on sys.path and hands `set_config` a dict
that has `iteritems`, then runs the script unchanged: `python kafkatest_run.py producer ARGS...`.
"""

from __future__ import annotations

import os
import runpy
import sys

import confluent_kafka.kafkatest as kafkatest

HERE = os.path.dirname(kafkatest.__file__)
sys.path.insert(0, HERE)

import verifiable_client  # noqa: E402

_orig = verifiable_client.VerifiableClient.set_config


class _Args(dict):  # type: ignore[type-arg]
    def iteritems(self):  # type: ignore[no-untyped-def]
        return iter(self.items())


def _set_config(conf, args):  # type: ignore[no-untyped-def]
    _orig(conf, _Args(args))


verifiable_client.VerifiableClient.set_config = staticmethod(_set_config)  # type: ignore[method-assign]
_orig_send = verifiable_client.VerifiableClient.send


def _send(self, d):  # type: ignore[no-untyped-def]
    # keys and values arrive as bytes on Python 3; JSON wants text
    _orig_send(self, {k: v.decode(errors="replace") if isinstance(v, bytes) else v for k, v in d.items()})


verifiable_client.VerifiableClient.send = _send  # type: ignore[method-assign]

if __name__ == "__main__":
    which = sys.argv.pop(1)
    sys.argv[0] = os.path.join(HERE, f"verifiable_{which}.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
