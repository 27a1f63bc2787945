"""Messages between PS workers and parameter servers (torch.distributed point-to-point).

Every message is one flat fp32 tensor: a small header followed by a shard of gradients
(worker -> PS) or parameters (PS -> worker). Fixed sizes let the receiver pre-allocate.

Worker -> PS header: ``[kind, ticket, stop_request, loss, checkpoint]`` with kind PUSH or
GOODBYE; ``checkpoint`` (worker 0 only) asks every PS to send its shard's SGD momentum to
worker 0 (tag ``TAG_CKPT``) right after its reply, so that worker 0, which then holds the
updated parameters, its batch-norm buffers and the momentum, writes a periodic checkpoint.
PS -> worker header: ``[grant, ticket, stop_request, step, 0]``: only PS 0's ``grant`` counts
(async: the worker may compute the step ``ticket``; sync: continue with another round);
any PS may set ``stop_request`` (it was asked to stop), which the worker passes on to PS 0
with its next push.

Why tickets: in async mode PS 0 hands out global step numbers, one per gradient to be
computed, until the stop step. Every granted ticket becomes exactly one push to every PS,
so all shards apply the same number of updates and the job stops at one common step with
no collective to agree on it. The ticket is also the data position: the worker trains on
batch ``ticket`` of the global stream.
"""

from __future__ import annotations

import torch

__all__ = [
    "CKPT_FLAG",
    "GOODBYE",
    "HEADER",
    "PUSH",
    "TAG_CKPT",
    "TAG_GATHER",
    "TAG_PROTOCOL",
    "make_message",
]

HEADER = 5
CKPT_FLAG = 4  # header index of a worker's checkpoint request
PUSH = 1.0
GOODBYE = 2.0

# Tags keep the end-of-run gather apart from protocol traffic, whatever the arrival order.
TAG_PROTOCOL = 1
TAG_GATHER = 2
TAG_CKPT = 3


def make_message(size: int) -> torch.Tensor:
    return torch.zeros(HEADER + size, dtype=torch.float32)
