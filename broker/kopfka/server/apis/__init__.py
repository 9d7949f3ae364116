"""Request handlers, one module per API family. Importing `load_all()` registers every
handler module in this package (each registers itself with `@api(key)`)."""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "registry":
            importlib.import_module(f"{__name__}.{mod.name}")
