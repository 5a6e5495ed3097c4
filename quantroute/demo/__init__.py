"""The demos: the whole product on one machine, over a simulated fleet (`simulated`) or real vLLM servers (`real`)."""
