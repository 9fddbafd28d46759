# Two-stage build of the single kvtrail binary. CGO off: kvtrail needs no C.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/kvtrail ./cmd/kvtrail

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 kvtrail
COPY --from=build /out/kvtrail /usr/local/bin/kvtrail
USER kvtrail
EXPOSE 8080
ENTRYPOINT ["kvtrail"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
