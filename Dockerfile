# Hindsight worker / API / CLI image. Kafka and Milvus run in their own containers
# (docker-compose.yml), so this image needs neither Java nor Maven.
#
#   docker compose build
#   # CPU-only torch (a much smaller image) from PyTorch's own index:
#   docker compose build --build-arg PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
FROM python:3.11-slim

ARG PIP_EXTRA_INDEX_URL=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL} \
    HINDSIGHT_DATA_DIR=/data

WORKDIR /app

# Dependencies first, from pyproject.toml alone, so editing the code does not reinstall torch.
COPY pyproject.toml ./
RUN python - <<'PY' > /tmp/requirements.txt
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
RUN pip install -r /tmp/requirements.txt

COPY . .
# The encoders' ONNX export (python -m pipeline.models.export) is built into the image, beside the
# interpreter (<sys.prefix>/hindsight-models), so a container never exports at start-up.
RUN pip install --no-deps . \
    && HF_HUB_OFFLINE=1 python -m pipeline.models.export \
    && useradd --create-home --uid 1000 hindsight \
    && mkdir -p /data && chown hindsight:hindsight /data

USER hindsight
VOLUME ["/data"]
ENTRYPOINT ["hindsight"]
CMD ["--help"]
