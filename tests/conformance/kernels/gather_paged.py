"""Paged gather: a page table row per sequence (`cache[pages[s, tp], :, :, :]`) under `hl.grid`."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(17)
    return [torch.randperm(32, generator=g).to(torch.int32).reshape(2, 16), torch.randn(32, 8, 2, 128, generator=g)]


@helion.kernel(static_shapes=True)
def gather_paged(pages: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    batch, npages = pages.size()
    _, page_size, heads, d = cache.size()
    out = torch.empty((batch, npages, page_size, heads, d), dtype=cache.dtype, device=cache.device)
    for s in hl.grid(batch):
        for tp in hl.tile(npages, block_size=4):
            out[s, tp, :, :, :] = cache[pages[s, tp], :, :, :]
    return out


def reference(pages, cache):
    return cache[pages.long()]
