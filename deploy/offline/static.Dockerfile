# gcr.io/distroless/static-debian13:nonroot made offline: CA certificates,
# time zones and the nonroot user (65532), nothing else. See base-images.sh.
FROM debian:trixie-slim AS files
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /out/etc/ssl/certs /out/usr/share /out/tmp /out/home/nonroot \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && cp -r /usr/share/zoneinfo /out/usr/share/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/etc/passwd \
 && printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >/out/etc/group \
 && printf 'hosts: files dns\n' >/out/etc/nsswitch.conf \
 && chmod 1777 /out/tmp \
 && chown 65532:65532 /out/home/nonroot

FROM scratch
COPY --from=files /out/ /
USER 65532:65532
WORKDIR /home/nonroot
