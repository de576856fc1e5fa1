// Package image tests the release image that `make release` builds (deploy/image): it loads
// the docker-archive into podman, with no daemon, and runs the image as its own user against
// the test PostgreSQL. Its test carries the build tag image, so that `go test ./...` leaves it
// out; `make test-image` builds the image for the machine's architecture and runs it:
//
//	go test -tags image ./test/image   # with QUEUEBOX_IMAGE_ARCHIVE and QUEUEBOX_IMAGE_VERSION
package image
