"""Who a user credential is: names, roles and quotas from the controller's users file.

The file (``mlsched controller --users-file``; ``mlsched user add`` writes it) is YAML or
JSON::

    users:
      - name: alice
        token_sha256: 5e884898da28...   # the SHA-256 of alice's token, never the token
        quota: {gpus: 8, queued: 20}     # optional; absent: no limit
      - name: ops
        token_sha256: 9f86d081884c...
        role: admin                      # may cancel and read the logs of every job

Only token digests are stored, so the file holds no secret (``mlsched user add`` writes it
readable by all, for a controller running as another user); it must not be writable by
group or others (whoever writes it chooses who is admin). The controller's own ``--token``
stays the operator's credential: the user ``admin``, role admin. Without a users file that
one token (or, on loopback, no token) is everyone, with every right, as before users existed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from mlsched.core.documents import load_document
from mlsched.core.errors import SpecError
from mlsched.core.ids import check_id
from mlsched.net.auth import bearer_token, new_secret, write_file

__all__ = [
    "ADMIN",
    "OPERATOR",
    "Quota",
    "User",
    "Users",
    "UsersFile",
    "add_user",
    "load_users",
    "remove_user",
    "token_digest",
    "user_of",
]

log = logging.getLogger(__name__)

ROLES = ("user", "admin")
#: The name the controller's own --token goes by (and everyone, without a users file).
OPERATOR = "admin"
_MAX_USERS = 10_000
_MAX_QUOTA = 10**9


@dataclass(frozen=True)
class Quota:
    """Limits enforced at intake (None: none). ``gpus``: the GPUs a user's unfinished jobs
    may hold at most together (each at its largest: every worker it may grow to); ``queued``:
    the user's jobs submitted and not running yet (pending, waiting or paused)."""

    gpus: int | None = None
    queued: int | None = None

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in (("gpus", self.gpus), ("queued", self.queued)) if v is not None}


@dataclass(frozen=True)
class User:
    name: str
    admin: bool = False
    quota: Quota = field(default_factory=Quota)

    @property
    def role(self) -> str:
        return "admin" if self.admin else "user"

    def may_act_on(self, owner: str | None) -> bool:
        """Whether this user may cancel (or read the logs of) a job owned by ``owner``."""
        return self.admin or (owner is not None and owner == self.name)


ADMIN = User(OPERATOR, admin=True)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Users:
    """The users a controller knows, by token digest."""

    def __init__(self, users: Mapping[str, User] | None = None) -> None:
        self._by_digest = dict(users or {})

    def __len__(self) -> int:
        return len(self._by_digest)

    def identify(self, token: str) -> User | None:
        """The user whose token this is (None: no user's). Looked up by the token's digest:
        what the look-up's time depends on is a hash of what the caller sent."""
        return self._by_digest.get(token_digest(token))

    def names(self) -> list[str]:
        return sorted(u.name for u in self._by_digest.values())

    def by_name(self, name: str) -> User | None:
        return next((u for u in self._by_digest.values() if u.name == name), None)


def _quota(raw: Any, where: str) -> Quota:
    if raw is None:
        return Quota()
    if not isinstance(raw, Mapping):
        raise SpecError(where, raw, "a mapping with gpus and/or queued")
    unknown = set(raw) - {"gpus", "queued"}
    if unknown:
        raise SpecError(f"{where}.{sorted(unknown)[0]}", raw, "only gpus and queued")
    values: dict[str, int | None] = {}
    for key in ("gpus", "queued"):
        value = raw.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_QUOTA
        ):
            raise SpecError(f"{where}.{key}", value, f"an integer in [0, {_MAX_QUOTA}]")
        values[key] = value
    return Quota(**values)


def parse_users(raw: Any, where: str) -> dict[str, User]:
    """The users of a users-file document, by token digest; a SpecError names the field."""
    if not isinstance(raw, Mapping) or set(raw) - {"users"}:
        raise SpecError("users", raw, "a mapping with one key, users: a list", where=where)
    entries = raw.get("users") or []
    if not isinstance(entries, list) or len(entries) > _MAX_USERS:
        raise SpecError("users", entries, f"a list of at most {_MAX_USERS} users", where=where)
    out: dict[str, User] = {}
    names: set[str] = set()
    for i, entry in enumerate(entries):
        at = f"users[{i}]"
        try:
            if not isinstance(entry, Mapping):
                raise SpecError(at, entry, "a mapping: name, token_sha256, role, quota")
            unknown = set(entry) - {"name", "token_sha256", "role", "quota"}
            if unknown:
                raise SpecError(f"{at}.{sorted(unknown)[0]}", entry, "name, token_sha256, "
                                "role, quota")  # fmt: skip
            name = check_id(entry.get("name"), f"{at}.name", max_len=64)
            if name in names or name == OPERATOR:
                raise SpecError(f"{at}.name", name, f"a name used once, not {OPERATOR!r} (the "
                                "controller's --token)")  # fmt: skip
            digest = entry.get("token_sha256")
            if not (isinstance(digest, str) and len(digest) == 64 and _is_hex(digest)):
                raise SpecError(f"{at}.token_sha256", digest, "64 hex digits (mlsched user add)")
            digest = digest.lower()
            if digest in out:
                raise SpecError(f"{at}.token_sha256", digest, "a token used by one user only")
            role = entry.get("role", "user")
            if role not in ROLES:
                raise SpecError(f"{at}.role", role, f"one of {', '.join(ROLES)}")
            quota = _quota(entry.get("quota"), f"{at}.quota")
        except SpecError as err:
            raise SpecError(err.field, err.value, err.expected, where=where) from None
        names.add(name)
        out[digest] = User(name, admin=role == "admin", quota=quota)
    return out


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


def _read(path: Path) -> Any:
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as err:
        raise SpecError("users_file", str(path), f"a readable file ({err.strerror})") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SpecError(
            "users_file",
            str(path),
            f"a file only its owner can write (chmod go-w {path}: it says who is admin)",
        )
    return load_document(data, where=str(path)) if data.strip() else {"users": []}


def load_users(path: str | os.PathLike[str]) -> Users:
    """The users file at ``path``, validated whole (a bad entry names its field)."""
    where = Path(path)
    return Users(parse_users(_read(where), str(where)))


class UsersFile:
    """The users file as the controller serves it: read at start (a bad file stops the
    start), then read again when it changes, checked at most every ``every_s`` seconds, so
    users are added and removed without a restart. A changed file that does not load is
    logged and the users before it stay."""

    def __init__(self, path: str | os.PathLike[str], every_s: float = 1.0) -> None:
        self.path = Path(path)
        self._every = every_s
        self._lock = threading.Lock()
        self._stamp = self._mtime()
        self._users = load_users(self.path)
        self._checked = time.monotonic()

    def _mtime(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def current(self) -> Users:
        now = time.monotonic()
        if now - self._checked < self._every:
            return self._users
        with self._lock:
            if now - self._checked < self._every:
                return self._users
            self._checked = now
            stamp = self._mtime()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._users = load_users(self.path)
                    log.info("[users] %s read again: %d users", self.path, len(self._users))
                except SpecError as err:
                    log.error("[users] %s changed but does not load, kept the users before "
                              "it: %s", self.path, err)  # fmt: skip
        return self._users


def user_of(
    context: grpc.ServicerContext, token: str | None, users: UsersFile | None
) -> User | None:
    """Who made a JobService call: the controller's own ``token`` is the operator (admin),
    a users-file token its user; without a token the controller has one user, the operator.
    None only for a credential the interceptor would have refused."""
    if token is None:
        return ADMIN
    bearer = bearer_token(context)
    if bearer is None:
        return None
    if hmac.compare_digest(bearer.encode(), token.encode()):
        return ADMIN
    return users.current().identify(bearer) if users is not None else None


def _entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    raw = _read(path)
    parse_users(raw, str(path))  # only a valid file is changed
    return [dict(e) for e in raw.get("users") or []]


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    import yaml

    text = yaml.safe_dump({"users": entries}, sort_keys=False, default_flow_style=False)
    # Readable by all (digests only: the controller may run as another user than whoever
    # edits it), writable by the owner only.
    write_file(path, text.encode(), 0o644)


def add_user(
    path: str | os.PathLike[str], name: str, *, admin: bool = False, quota: Quota = Quota()
) -> str:
    """Add ``name`` to the users file (created if absent) with a new random token, which is
    returned: the file keeps only its digest. A name already there is a SpecError."""
    where = Path(path)
    entries = _entries(where)
    check_id(name, "name", max_len=64)
    if name == OPERATOR or any(e.get("name") == name for e in entries):
        raise SpecError("name", name, f"a name not in {where} yet (and not {OPERATOR!r})")
    token = new_secret()
    entry: dict[str, Any] = {"name": name, "token_sha256": token_digest(token)}
    if admin:
        entry["role"] = "admin"
    if quota.to_dict():
        entry["quota"] = quota.to_dict()
    entries.append(entry)
    parse_users({"users": entries}, str(where))
    _write(where, entries)
    return token


def remove_user(path: str | os.PathLike[str], name: str) -> None:
    """Remove ``name`` from the users file (a running controller reads it again within a
    second: the token stops working; the user's jobs keep their owner)."""
    where = Path(path)
    entries = _entries(where)
    kept = [e for e in entries if e.get("name") != name]
    if len(kept) == len(entries):
        raise SpecError("name", name, f"a user in {where}")
    _write(where, kept)
