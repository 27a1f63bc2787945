"""Named contexts, as kubeconfig has them: a client configuration file holding, per name,
how to reach one controller (address, token file, CA, client certificate and key), and the
name in use. ``--context NAME`` or ``MLSCHED_CONTEXT`` picks another for one command.

The file is ``MLSCHED_CONFIG`` or ``~/.config/mlsched/config.yaml``::

    current-context: lab
    contexts:
      lab:
        controller: ctl.example.org:50051
        token-file: ~/.mlsched/token      # a path: the token itself never goes here
        tls-ca: pki/ca.pem                # relative paths: from the file's directory
        tls-cert: pki/alice.pem
        tls-key: pki/alice.key

A context supplies only what neither a flag nor its variable gives (``net/env.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlsched.core.documents import load_document
from mlsched.core.errors import SpecError
from mlsched.core.ids import check_id
from mlsched.net.auth import write_private_file

__all__ = ["FIELDS", "Config", "config_path", "load_config", "save_config"]

#: A context's fields: the flag each stands for (paths among them marked True).
FIELDS = {
    "controller": False,
    "token-file": True,
    "tls-ca": True,
    "tls-cert": True,
    "tls-key": True,
}


def config_path() -> Path:
    given = os.environ.get("MLSCHED_CONFIG")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mlsched" / "config.yaml"


@dataclass
class Config:
    path: Path
    current: str | None = None
    contexts: dict[str, dict[str, str]] = field(default_factory=dict)

    def context(self, name: str | None) -> dict[str, str]:
        """The named context (else the current one), paths made absolute; an empty one
        when no name is given and none is current."""
        chosen = name or self.current
        if chosen is None:
            return {}
        if chosen not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise SpecError("context", chosen, f"a context of {self.path} (known: {known})")
        out = {}
        for key, value in self.contexts[chosen].items():
            if FIELDS[key]:
                path = Path(value).expanduser()
                value = str(path if path.is_absolute() else self.path.parent / path)
            out[key] = value
        return out


def load_config(path: Path | None = None) -> Config:
    """The configuration file (an empty one where it does not exist); a malformed file is
    refused with the field named."""
    path = path or config_path()
    if not path.exists():
        return Config(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SpecError("config", str(path), f"a readable file ({err.strerror})") from None
    doc: Any = load_document(raw, where=str(path)) or {}
    if not isinstance(doc, dict):
        raise SpecError("config", str(path), "a mapping with contexts: and current-context:")
    unknown = set(doc) - {"contexts", "current-context"}
    if unknown:
        raise SpecError(f"config.{sorted(unknown)[0]}", "set", "contexts or current-context")
    contexts = doc.get("contexts") or {}
    if not isinstance(contexts, dict):
        raise SpecError("config.contexts", type(contexts).__name__, "a mapping of name: context")
    out: dict[str, dict[str, str]] = {}
    for name, body in contexts.items():
        check_id(str(name), "config.contexts")
        if not isinstance(body, dict):
            raise SpecError(f"config.contexts.{name}", type(body).__name__, "a mapping")
        for key, value in body.items():
            if key not in FIELDS:
                raise SpecError(
                    f"config.contexts.{name}.{key}", value, f"one of {', '.join(FIELDS)}"
                )
            if not isinstance(value, str) or not value.strip():
                raise SpecError(f"config.contexts.{name}.{key}", value, "a non-empty string")
        out[str(name)] = {str(k): str(v) for k, v in body.items()}
    current = doc.get("current-context")
    if current is not None and str(current) not in out:
        raise SpecError("config.current-context", current, "one of the contexts")
    return Config(path, None if current is None else str(current), out)


def save_config(config: Config) -> None:
    """Write the file (readable by its owner only: it names credentials' files)."""
    import yaml

    doc: dict[str, Any] = {"contexts": config.contexts}
    if config.current is not None:
        doc["current-context"] = config.current
    config.path.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(config.path, yaml.safe_dump(doc, sort_keys=True).encode())
