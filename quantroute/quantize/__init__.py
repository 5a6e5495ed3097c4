"""`quantroute quantize`: make a quantized artifact of a 16-bit model with llm-compressor (in its own venv),
with its own deployment id and its lineage recorded next to its weights."""
