package main

import "time"

// Definition is what the release image holds and how it runs: the facts that the queuebox
// stage of local/Dockerfile states too. definition_test.go holds the two to each other.
type Definition struct {
	// User is the user the container runs as, uid:gid, numeric so that Kubernetes'
	// runAsNonRoot can check it without reading /etc/passwd.
	User string
	// UID and GID are the ids of User, the owner of the state directories.
	UID, GID int
	// Passwd and Group are the lines of /etc/passwd and /etc/group.
	Passwd, Group []string
	// WorkDir is the working directory, owned by User.
	WorkDir string
	// StateDirs are the directories that User owns: the working directory and the capture
	// state directory (outbox.capture.stateDirectory).
	StateDirs []string
	// Binaries are the programs in BinDir, by file name.
	Binaries []string
	// BinDir is where the binaries are.
	BinDir string
	// Ports are the exposed ports, as "8080/tcp".
	Ports []string
	// Health is the HEALTHCHECK: the probe's command and its timings.
	Health Health
	// Entrypoint and Cmd start `queuebox serve`.
	Entrypoint, Cmd []string
	// Env is the environment of the container.
	Env []string
	// CABundle is where the CA certificates are, the path that Go's crypto/x509 reads first
	// on Linux; ZoneInfo is the time-zone database that Go's time package reads.
	CABundle, ZoneInfo string
	// Docs are the licence texts that the image carries beside what they cover: QueueBox's
	// licence and third-party notices, and the Debian copyright files of the CA bundle and the
	// time zones.
	Docs []Doc
}

// Doc is a file copied into the image: Source is a path of the machine when absolute, else
// a path of the repository.
type Doc struct {
	Path, Source string
}

// Health is a HEALTHCHECK of the image.
type Health struct {
	Test                           []string
	Interval, Timeout, StartPeriod time.Duration
	Retries                        int
}

// release is the definition of the release image.
var release = Definition{
	User: "10001:10001",
	UID:  10001,
	GID:  10001,
	Passwd: []string{
		"root:x:0:0:root:/root:/sbin/nologin",
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin",
		"queuebox:x:10001:10001:QueueBox:/var/lib/queuebox:/sbin/nologin",
	},
	Group:     []string{"root:x:0:", "nobody:x:65534:", "queuebox:x:10001:"},
	WorkDir:   "/var/lib/queuebox",
	StateDirs: []string{"/var/lib/queuebox", "/var/lib/queuebox/capture"},
	Binaries:  []string{"queuebox", "healthprobe", "capturenode"},
	BinDir:    "/usr/local/bin",
	Ports:     []string{"8080/tcp"},
	Health: Health{
		Test:        []string{"CMD", "/usr/local/bin/healthprobe", "http://127.0.0.1:8080/health"},
		Interval:    30 * time.Second,
		Timeout:     5 * time.Second,
		StartPeriod: 60 * time.Second,
		Retries:     3,
	},
	Entrypoint: []string{"/usr/local/bin/queuebox"},
	Cmd:        []string{"serve"},
	Env: []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	},
	CABundle: "/etc/ssl/certs/ca-certificates.crt",
	ZoneInfo: "/usr/share/zoneinfo",
	Docs: []Doc{
		{Path: "/usr/share/doc/queuebox/LICENSE", Source: "LICENSE"},
		{Path: "/usr/share/doc/queuebox/THIRD_PARTY_NOTICES.md", Source: "THIRD_PARTY_NOTICES.md"},
		{Path: "/usr/share/doc/ca-certificates/copyright", Source: "/usr/share/doc/ca-certificates/copyright"},
		{Path: "/usr/share/doc/tzdata/copyright", Source: "/usr/share/doc/tzdata/copyright"},
	},
}
