# One image for every quantroute process: the entrypoint is the `quantroute` command, the first argument picks
# the process (router, dashboard, controller, sim, db upgrade, ...). Build: docker build -t quantroute:0.1.0 .

# ---- build: the wheel and every dependency's wheel (no compiler or cache in the final image). The wheel holds
# every process: quantroute/ (router, controller, sim, migrations), dashboard/ (the Streamlit app) and data/ (the
# reference tables and the default policy, packaged through the quantroute/data symlink). tests/deploy/test_image.py
# builds the wheel from exactly these paths.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY quantroute ./quantroute
COPY dashboard ./dashboard
COPY data ./data
# data/default-policy.yaml is a symlink to this file
COPY policies/policy-0001.yaml ./policies/policy-0001.yaml
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[postgres,otel]"

# ---- runtime: the installed wheel, run as an unprivileged user
FROM python:3.11-slim AS runtime
RUN groupadd --system --gid 10001 quantroute \
 && useradd --system --uid 10001 --gid quantroute --home-dir /var/lib/quantroute --create-home quantroute
COPY --from=build /wheels /wheels
# otel: tracing stays off until OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER) is set (docs/deploy/tracing.md)
RUN pip install --no-cache-dir --no-index --find-links /wheels "quantroute[postgres,otel]" && rm -rf /wheels
# Policy mirror files, the SQLite file (single host) and load-test output live under the working directory.
WORKDIR /var/lib/quantroute
ENV PYTHONUNBUFFERED=1 \
    QUANTROUTE_ROUTER_HOST=0.0.0.0 \
    QUANTROUTE_ROUTER_PORT=8080 \
    QUANTROUTE_ROUTER_POLICIES_DIR=/var/lib/quantroute/policies
USER 10001:10001
EXPOSE 8080 8501 9101
ENTRYPOINT ["quantroute"]
CMD ["router"]
