"""Opening an SSH connection: the address, ~/.ssh/config, keys, keepalive, host-key policy, and
bounded retries with backoff (tenacity) for network errors only."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import asyncssh
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from tools.hosts.base import HostError
from tools.hosts.keys import Client, KeyPolicy

if TYPE_CHECKING:
    from tools.domain.config import HostConfig

CONNECT_ATTEMPTS = 4
CONNECT_MAX_DELAY_S = 30.0


@dataclass(frozen=True)
class Target:
    host: str
    port: int | None
    user: str | None

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"ssh://{user}{self.host}" + (f":{self.port}" if self.port else "")


def parse_address(address: str) -> Target:
    """ssh://[user@]host[:port]; host may be a ~/.ssh/config alias."""
    parts = urlsplit(address)
    try:
        port = parts.port
    except ValueError:
        raise HostError(f"bad port in host address {address!r}") from None
    if parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/"):
        raise HostError(f'bad host address {address!r}: use "local" or ssh://[user@]host[:port]')
    return Target(parts.hostname, port, parts.username)


def _retryable(err: BaseException) -> bool:
    if isinstance(err, asyncssh.PermissionDenied | asyncssh.HostKeyNotVerifiable | socket.gaierror):
        return False
    return isinstance(err, OSError | asyncssh.Error | TimeoutError)


async def connect(cfg: HostConfig, target: Target) -> asyncssh.SSHClientConnection:
    """A new connection, retried with backoff on network errors; HostError with the fix when
    the login or the host key is refused (never retried)."""
    name = cfg.name
    policy = KeyPolicy(cfg.known_hosts, name)
    kwargs: dict[str, Any] = {
        "known_hosts": policy.known_hosts_arg(),
        "client_factory": lambda: Client(policy),
        "keepalive_interval": cfg.keepalive_s,
        "keepalive_count_max": 3,
        "connect_timeout": cfg.connect_timeout_s,
    }
    if target.port:
        kwargs["port"] = target.port
    if target.user:
        kwargs["username"] = target.user
    if cfg.identity_file:
        key = Path(cfg.identity_file).expanduser()
        if not key.is_file():
            raise HostError(f"host {name}: identity_file {cfg.identity_file} not found")
        kwargs["client_keys"] = [str(key)]
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(CONNECT_ATTEMPTS) | stop_after_delay(CONNECT_MAX_DELAY_S),
            wait=wait_exponential_jitter(multiplier=0.5, max=8, jitter=0.5),
            reraise=True,
        ):
            with attempt:
                return await asyncssh.connect(target.host, **kwargs)
    except asyncssh.HostKeyNotVerifiable as err:
        raise HostError(policy.refusal or f"host {name}: host key refused: {err}") from None
    except asyncssh.PermissionDenied:
        keys = cfg.identity_file or "the default keys / ssh-agent"
        raise HostError(
            f"host {name} ({target}) refused the login: check the user and "
            f"identity_file ({keys}) and the box's authorized_keys"
        ) from None
    except socket.gaierror:
        raise HostError(f"host {name}: cannot resolve {target.host!r}") from None
    except (OSError, asyncssh.Error, TimeoutError) as err:
        why = str(err) or type(err).__name__
        raise HostError(
            f"cannot connect to host {name} ({target}) after {CONNECT_ATTEMPTS} tries: {why}"
        ) from None
    raise AssertionError("unreachable")
