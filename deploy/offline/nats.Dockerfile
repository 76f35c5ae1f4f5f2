# nats:<version>-alpine made offline: the nats-server binary in the build
# context (built from its Go module by base-images.sh) on Debian slim, with
# busybox's wget for the compose healthcheck. It runs as the official image
# does: the compose command's flags go to nats-server.
FROM debian:trixie-slim
ARG VERSION
RUN apt-get update \
 && apt-get install -y --no-install-recommends busybox \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /bin/busybox /usr/local/bin/wget
COPY nats-server /usr/local/bin/nats-server
LABEL org.opencontainers.image.title="nats-server" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.description="nats-server built from its Go module by deploy/offline/base-images.sh"
EXPOSE 4222 6222 8222
ENTRYPOINT ["/usr/local/bin/nats-server"]
CMD ["--config", "/etc/nats/nats.conf"]
