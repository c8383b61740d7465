"""Which addresses a webhook may reach: refuse link-local, cloud metadata, loopback.

A webhook makes the queue's host send requests where a user asked, so a URL
must not reach what only that host can reach (the classic SSRF targets). The
guard checks the URL when the webhook is added (a literal address or a known
metadata host name) and again every address the host name resolves to at each
delivery; the request then goes to the address that was checked, so a name
that changes its answer in between (DNS rebinding) gains nothing.

Refused by default: link-local (169.254.0.0/16, fe80::/10, which hold the AWS,
GCP and Azure metadata services), the other metadata addresses (fd00:ec2::254,
100.100.100.200), loopback (127.0.0.0/8, ::1, ``localhost``), unspecified,
multicast and reserved ranges, and IPv4-mapped IPv6 forms of all of them.
Private networks (10/8, 172.16/12, 192.168/16, fc00::/7) are allowed: a
receiver inside the cluster is the common case. ``allow`` (``bunq serve
--webhook-allow 127.0.0.1/32``) lets chosen networks through anyway.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from ..errors import ValidationError, WebhookTargetRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED: tuple[tuple[str, str], ...] = (
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("fe80::/10", "link-local"),
    ("fd00:ec2::254/128", "cloud metadata"),
    ("100.100.100.200/32", "cloud metadata"),
    ("127.0.0.0/8", "loopback"),
    ("::1/128", "loopback"),
    ("0.0.0.0/8", "unspecified"),
    ("::/128", "unspecified"),
    ("224.0.0.0/4", "multicast"),
    ("ff00::/8", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.azure.internal",
                            "instance-data", "instance-data.ec2.internal"})  # fmt: skip
MAX_URL = 2048


class TargetGuard:
    """Refuses webhook targets in :data:`REFUSED` unless a network in ``allow`` holds them."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        try:
            self.allow: tuple[Network, ...] = tuple(
                ipaddress.ip_network(a, strict=False) for a in allow
            )
        except ValueError as exc:
            raise ValidationError(f"bad webhook allow-list entry: {exc}", field="allow") from None
        self._refused = tuple((ipaddress.ip_network(n), why) for n, why in REFUSED)

    def check_url(self, url: object) -> tuple[str, str, int]:
        """Validate ``url`` (http/https, a host, not a refused literal); return
        ``(scheme, host, port)``."""
        if not isinstance(url, str) or not url or len(url) > MAX_URL:
            raise ValidationError(f"url must be a string of 1..{MAX_URL} characters", field="url")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ValidationError(f"invalid url: {exc}", field="url") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError("url must be http:// or https:// with a host", field="url")
        host = parts.hostname.lower().rstrip(".")
        if host in METADATA_HOSTS:
            raise WebhookTargetRefused(f"webhook url {host!r} is a cloud metadata host",
                                       address=host, field="url")  # fmt: skip
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal)
        elif host == "localhost" or host.endswith(".localhost"):
            self.check_address(ipaddress.ip_address("127.0.0.1"))
        return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)

    def check_address(self, addr: IPAddress) -> None:
        """Raise WebhookTargetRefused unless ``addr`` may be reached."""
        plain = addr.ipv4_mapped or addr if isinstance(addr, ipaddress.IPv6Address) else addr
        if any(plain in net for net in self.allow if net.version == plain.version):
            return
        for net, why in self._refused:
            if net.version == plain.version and plain in net:
                raise WebhookTargetRefused(
                    f"webhook target {plain} is {why}: refused (allow it with --webhook-allow)",
                    address=str(plain),
                    field="url",
                )

    def resolve(self, host: str, port: int) -> list[tuple[int, str]]:
        """Resolve ``host``; every address must pass. Return ``[(family, address)]``."""
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal)
            return [(socket.AF_INET6 if literal.version == 6 else socket.AF_INET, str(literal))]
        if host == "localhost" or host.endswith(".localhost"):
            self.check_address(ipaddress.ip_address("127.0.0.1"))
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ValidationError(f"cannot resolve {host!r}: {exc}", field="url") from None
        out: list[tuple[int, str]] = []
        for family, _, _, _, sockaddr in infos:
            addr = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
            self.check_address(addr)
            out.append((family, str(addr)))
        return out


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
