package oci

import "os"

// NonRootUID is distroless's nonroot user, the Dockerfile's USER and the manifests' runAsUser.
const NonRootUID = 65532

// DefaultPath is the PATH distroless and Docker set.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// NonRootBase is the part of gcr.io/distroless/static-debian13:nonroot (the Dockerfile's base)
// that a static binary sees, written here because distroless cannot be pulled where driverset is
// built and tested: /etc/passwd and /etc/group with root, nobody and nonroot (65532),
// /home/nonroot (0700, nonroot's), /tmp (1777). Left out: CA certificates (driverset talks only
// to the apiserver, trusting the ServiceAccount's CA, and to nothing else), tzdata (it uses no
// time zone but UTC and Local, which is UTC in a container without /etc/localtime) and
// /etc/os-release (nothing in the image is a Debian package).
func NonRootBase() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/home/nonroot", Mode: os.ModeDir | 0o700, UID: NonRootUID, GID: NonRootUID},
		{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
	}
}

// Driverset is the Dockerfile's image: bin (a static linux build of cmd/driverset) at /driverset
// on NonRootBase, entrypoint /driverset, user 65532:65532, PATH as distroless sets it. The caller
// sets Name, Arch, Created and the rest.
func Driverset(bin []byte) Image {
	return Image{
		Files:      append(NonRootBase(), File{Path: "/driverset", Mode: 0o755, Data: bin}),
		Entrypoint: []string{"/driverset"},
		Env:        []string{DefaultPath},
		User:       "65532:65532",
	}
}
