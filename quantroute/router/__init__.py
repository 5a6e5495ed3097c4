"""The router: an OpenAI-compatible, precision-tiered, session-pinned, hot-reloading proxy in front of vLLM.

`create_app(settings)` in `app.py` builds the ASGI app; `running_router(settings)` in `testing.py` serves it
on a free port in a background thread."""
