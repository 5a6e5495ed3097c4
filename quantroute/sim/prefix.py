"""vLLM's automatic prefix caching, for one simulated node.

vLLM pages the KV cache in blocks of `BLOCK_SIZE` tokens and names every *full* block of a prompt by a hash
chained over all the tokens up to it, so equal hashes mean equal prefixes. A block stays cached after the
sequence that computed it finished: it is free memory that still holds valid KV, reused by a later prompt that
starts with the same tokens (its prefill skips them) and given up, least recently used first, only when a new
sequence needs the room. The cache therefore shares the node's KV capacity with the running sequences: what they
hold cannot be evicted, and everything else is cache.

Blocks are released deepest first (vLLM frees a finished request's blocks in reverse order), so a prefix shared
by many prompts, such as a system prompt, outlives the tails that follow it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from quantroute.capacity import BLOCK_SIZE


def block_hashes(pieces: Sequence[str], block_size: int = BLOCK_SIZE) -> tuple[int, ...]:
    """One chained hash per full block of `pieces` (a partial last block is never cached, as in vLLM)."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(pieces) - block_size + 1, block_size):
        parent = hash((parent, tuple(pieces[start:start + block_size])))
        out.append(parent)
    return tuple(out)


class PrefixCache:
    """Cached KV blocks by hash, with a reference count per block (running sequences using it). Blocks nobody
    uses are evictable, in least-recently-used order. The engine decides when to evict: this class only keeps
    the books."""

    def __init__(self) -> None:
        self._refs: dict[int, int] = {}  # every cached block -> running sequences holding it
        self._free: OrderedDict[int, None] = OrderedDict()  # cached blocks nobody holds, least recently used first

    @property
    def blocks(self) -> int:
        """Blocks of KV memory the cache occupies (held or not)."""
        return len(self._refs)

    @property
    def evictable(self) -> int:
        return len(self._free)

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of a prompt are cached: the prefix its prefill can skip."""
        n = 0
        for h in hashes:
            if h not in self._refs:
                break
            n += 1
        return n

    def missing(self, hashes: Sequence[int]) -> int:
        """Blocks of `hashes` not in the cache: what holding them would newly allocate."""
        return sum(1 for h in hashes if h not in self._refs)

    def hold(self, hashes: Sequence[int]) -> None:
        """A running sequence uses these blocks (found or newly computed): none of them can be evicted now."""
        for h in hashes:
            self._refs[h] = self._refs.get(h, 0) + 1
            self._free.pop(h, None)

    def release(self, hashes: Sequence[int]) -> None:
        """The sequence ended: its blocks stay cached and become evictable, the deepest first."""
        for h in reversed(hashes):
            n = self._refs.get(h)
            if n is None:
                continue
            self._refs[h] = n - 1
            if n <= 1:
                self._refs[h] = 0
                self._free[h] = None  # most recently used end

    def evict(self, blocks: int) -> int:
        """Give up to `blocks` unused blocks back to free memory, least recently used first; returns how many."""
        n = 0
        while n < blocks and self._free:
            h, _ = self._free.popitem(last=False)
            del self._refs[h]
            n += 1
        return n
