"""How many CPU threads torch uses for the agents' small networks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(threads: int = 1) -> Iterator[None]:
    """Run torch's CPU kernels on ``threads`` threads inside the block (and flush denormals to zero).

    The agents' networks (SB3 policies, the one-shot predictor) are small: more threads gain
    little, and on a shared machine they lose a lot (OpenMP threads spin while another process
    holds a core; 10x slower training steps were seen on 2 busy cores). Activations of inputs far
    from the training data underflow into denormals, which cost about 5x on x86; flushing them to
    zero changes no prediction that matters.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_num_threads(before)
