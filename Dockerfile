# dubstudio: multi-stage build. The runtime image has ffmpeg and espeak-ng so the CPU
# preview engine and the duration lock work out of the box; GPU hosts add the
# IndexTTS Python environment on top (see docs/engines.md).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go tool templ generate \
 && CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/dubstudio ./cmd/dubstudio

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates ffmpeg espeak-ng sox python3 tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/dubstudio dubstudio
COPY --from=build /out/dubstudio /usr/local/bin/dubstudio
COPY tts/hosts /usr/local/share/dubstudio/hosts
USER dubstudio
WORKDIR /var/lib/dubstudio
ENV DATA_DIR=/var/lib/dubstudio/data \
    HTTP_ADDR=0.0.0.0:8080 \
    DUBSTUDIO_HOSTS_DIR=/usr/local/share/dubstudio/hosts
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/dubstudio"]
CMD ["serve"]
