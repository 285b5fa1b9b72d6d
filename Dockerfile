# syntax=docker/dockerfile:1
# Multi-stage build: a static hooksproxy binary in a distroless nonroot image.
# CI cannot run docker here; .ci/run builds the same static binary with the
# same flags instead.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hooksproxy ./cmd/hooksproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hooksproxy /usr/local/bin/hooksproxy
USER nonroot:nonroot
EXPOSE 8080
# Mount the config here; listen on 0.0.0.0:8080 in it (or pass --listen) to be reachable.
ENV HOOKSPROXY_CONFIG=/etc/hooksproxy/hooksproxy.yaml
ENTRYPOINT ["/usr/local/bin/hooksproxy"]
CMD ["serve"]
