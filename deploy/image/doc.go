// Command image assembles the QueueBox release image for one architecture from static
// binaries that `make release` built, without a container daemon and without pulling a base
// image: FROM scratch, with the user queuebox (10001), the capture state directory that it
// owns, Debian's CA bundle and time-zone data with their copyright files, QueueBox's licence
// and third-party notices, and the binaries queuebox, healthprobe and capturenode. It writes the image as a docker-archive (the format of `docker save`, Docker
// image manifest v2 schema 2), which keeps the HEALTHCHECK that an OCI image config drops;
// `docker load` and `podman load` read it.
//
//	go -C deploy/image run . -arch amd64 -bin ../../bin/release/linux-amd64 \
//	    -version v1.2.3 -out ../../dist/queuebox-image-v1.2.3-linux-amd64.tar
//
// The image's facts (user, ports, health check, paths, entrypoint) are in definition.go;
// its test holds them to the queuebox stage of local/Dockerfile, so that the two images
// cannot drift. It is a Go module of its own so that the service module does not link the
// container-image library.
package main
