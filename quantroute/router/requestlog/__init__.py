"""The request log: storable rows, what privacy allows to keep, the batched writer and retention."""
