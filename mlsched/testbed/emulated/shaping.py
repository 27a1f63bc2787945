"""Link shaping with ``tc``: a token bucket (tbf) per link end, netem in front for delay.

tc shapes what leaves an interface, so a link is shaped at both of its ends: each end's
egress carries one direction. A veth itself has no rate (it moves data as fast as the CPU
copies it), so the token bucket alone sets the link's speed.

The bucket holds 2 ms of traffic (at least 64 KiB, so a 64 KiB segmentation-offload packet
passes whole) and queues up to 50 ms of it before dropping, which lets a TCP stream fill
the link without large bursts above the rate. With a delay, netem is the root qdisc and the
token bucket its child (the recipe of netem's manual page).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from mlsched.testbed.emulated.netns import EmulationError, EmulationUnavailable, run_command

__all__ = ["LinkShape", "netem_available", "read_rate_bits", "shape_link"]

log = logging.getLogger(__name__)

_BUCKET_S = 0.002
_MIN_BURST_BYTES = 64 * 1024
_QUEUE_S = 0.050
_NETEM_LIMIT_PACKETS = 100_000


@dataclass(frozen=True)
class LinkShape:
    """One direction of a link: its rate and the delay it adds."""

    gbps: float
    delay_ms: float = 0.0

    @property
    def rate_bits(self) -> int:
        return round(self.gbps * 1e9)

    def tbf_args(self) -> list[str]:
        rate_bytes = self.rate_bits / 8
        burst = max(_MIN_BURST_BYTES, round(rate_bytes * _BUCKET_S))
        limit = burst + round(rate_bytes * _QUEUE_S)
        return ["tbf", "rate", f"{self.rate_bits}bit", "burst", str(burst), "limit", str(limit)]


def _tc(ns: str, *args: str) -> str:
    try:
        return run_command(["tc", *(("-n", ns) if ns else ()), *args])
    except EmulationError as err:
        if "qdisc kind is unknown" in str(err):
            raise EmulationUnavailable(
                f"this kernel lacks a qdisc the shaping needs (tbf: CONFIG_NET_SCH_TBF; "
                f"netem: CONFIG_NET_SCH_NETEM): {err}"
            ) from None
        raise


def shape_link(ns: str, dev: str, shape: LinkShape) -> None:
    """Shape what leaves ``dev`` in namespace ``ns``."""
    if shape.delay_ms > 0:
        _tc(
            ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
            "delay", f"{shape.delay_ms:g}ms", "limit", str(_NETEM_LIMIT_PACKETS),
        )  # fmt: skip
        _tc(ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *shape.tbf_args())
    else:
        _tc(ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", *shape.tbf_args())


def read_rate_bits(ns: str, dev: str) -> int | None:
    """The token-bucket rate on ``dev`` (bits/s) as the kernel holds it, None if unshaped."""
    out = _tc(ns, "-j", "qdisc", "show", "dev", dev)
    for qdisc in json.loads(out or "[]"):
        if qdisc.get("kind") == "tbf":
            rate = qdisc.get("options", {}).get("rate")
            if isinstance(rate, (int, float)):
                return int(rate) * 8  # tc's JSON gives bytes per second
    return None


def netem_available(ns: str) -> None:
    """Raise :class:`EmulationUnavailable` when the kernel has no netem (delay) qdisc; tried
    on the loopback of namespace ``ns`` (one of the cluster's own) and removed at once."""
    try:
        _tc(ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
    except EmulationError as err:
        raise EmulationUnavailable(
            "--rtt-ms needs tc's netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM, "
            f"module sch_netem): {err}; run without --rtt-ms for rate shaping only"
        ) from None
    _tc(ns, "qdisc", "del", "dev", "lo", "root")
