# GPU worker image: CUDA runtime + forenset. Build: docker build -t forenset .
# Run a worker:  docker run --gpus all forenset forenset --help
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3-pip \
        libgl1 libglib2.0-0 && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
COPY forenset ./forenset
COPY examples ./examples
# CUDA build of torch for GPU workers (the CPU pin in README is for laptops and CI)
RUN pip install --upgrade pip && pip install "torch>=2.4" --index-url https://download.pytorch.org/whl/cu124 \
    && pip install -e .
CMD ["forenset", "--help"]
