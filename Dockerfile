# syntax=docker/dockerfile:1.7
#
# Laneway container image: a static binary on distroless, running as a
# numeric non-root user.
#
#   docker build -t laneway:dev .
#   docker run --rm -p 8080:8080 -e LANEWAY_ADMIN_TOKEN="$(openssl rand -hex 32)" laneway:dev
#
# The image listens on 0.0.0.0:8080 (LANEWAY_HTTP_ADDR), which Laneway only
# accepts with an admin token of at least 32 bytes: set LANEWAY_ADMIN_TOKEN
# (or --admin-token, or mount a file and set LANEWAY_ADMIN_TOKEN_FILE).
# Without --kafka-brokers / --redis-url it runs the embedded Kafka and Redis
# and persists to /var/lib/laneway; docker-compose.yml and deploy/kubernetes
# run it against a real Kafka and Redis. See docs/deploy.md.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-trixie AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Set by BuildKit for the platform being built (docker buildx --platform).
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} go build -trimpath -ldflags="-s -w" -o /out/laneway ./cmd/laneway && \
    GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} go build -trimpath -ldflags="-s -w" -o /out/laneway-healthcheck ./deploy/healthcheck && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/laneway /usr/local/bin/laneway
COPY --from=build /out/laneway-healthcheck /usr/local/bin/laneway-healthcheck
COPY --from=build --chown=65532:65532 /out/data /var/lib/laneway
WORKDIR /var/lib/laneway
ENV LANEWAY_HTTP_ADDR=0.0.0.0:8080 \
    LANEWAY_DATA_DIR=/var/lib/laneway
# distroless "nonroot", by number so that runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/laneway"]
CMD ["serve"]
