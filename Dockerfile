# syntax=docker/dockerfile:1

# Build: docker build -t surge .        Run: docker compose up --build
# The binary is static (CGO_ENABLED=0), so the runtime image needs no libc.

FROM golang:1.26 AS build
WORKDIR /src
# GOTOOLCHAIN=local: build with the image's Go, never download another toolchain.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
# Dependencies first, so code edits do not invalidate the module download layer.
COPY go.mod go.sum* ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/surge ./cmd/surge

# distroless static: CA certificates, tzdata and /etc/passwd with user nonroot
# (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/surge /surge
USER nonroot:nonroot
# Every interface of the container: -p decides what reaches it. (Outside a container a dev
# server, the embedded default, listens on loopback only; it still answers only for
# localhost, 127.0.0.1 and [::1] unless SURGE_ALLOWED_HOSTS says otherwise.)
ENV SURGE_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/surge"]
CMD ["serve"]
