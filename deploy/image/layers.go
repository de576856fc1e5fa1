package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// layerWriter writes the tar stream of one image layer. Every entry has the same time and
// is owned by root unless it says otherwise, so that one input gives one digest.
type layerWriter struct {
	tw      *tar.Writer
	buf     bytes.Buffer
	modTime time.Time
	dirs    map[string]bool
}

func newLayerWriter(modTime time.Time) *layerWriter {
	l := &layerWriter{modTime: modTime, dirs: map[string]bool{}}
	l.tw = tar.NewWriter(&l.buf)
	return l
}

// dir adds the directory name (absolute) and its missing parents, owned by root with mode
// 0755 unless the directory is given with its owner and mode.
func (l *layerWriter) dir(name string, uid, gid int, mode int64) error {
	name = path.Clean(name)
	if name == "/" || l.dirs[name] {
		return nil
	}
	if err := l.dir(path.Dir(name), 0, 0, 0o755); err != nil {
		return err
	}
	l.dirs[name] = true
	return l.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir, Name: strings.TrimPrefix(name, "/") + "/", Mode: mode,
		Uid: uid, Gid: gid, ModTime: l.modTime, Format: tar.FormatPAX,
	})
}

// file adds a regular file owned by root.
func (l *layerWriter) file(name string, mode int64, data []byte) error {
	if err := l.dir(path.Dir(name), 0, 0, 0o755); err != nil {
		return err
	}
	if err := l.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: int64(len(data)),
		ModTime: l.modTime, Format: tar.FormatPAX,
	}); err != nil {
		return err
	}
	_, err := l.tw.Write(data)
	return err
}

// copyFile adds the host file src as name.
func (l *layerWriter) copyFile(name, src string, mode int64) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s for %s: %w", src, name, err)
	}
	return l.file(name, mode, data)
}

// copyTree adds the host directory src as the directory name: its regular files (mode 0644)
// and the symbolic links that stay inside it. A link that leaves the tree (Debian's
// zoneinfo/localtime points at /etc/localtime) is left out.
func (l *layerWriter) copyTree(name, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(name, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return l.dir(target, 0, 0, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			return l.symlink(target, p, src)
		case d.Type().IsRegular():
			return l.copyFile(target, p, 0o644)
		}
		return nil
	})
}

// symlink adds the host link p as name when it points inside the tree root.
func (l *layerWriter) symlink(name, p, root string) error {
	link, err := os.Readlink(p)
	if err != nil {
		return fmt.Errorf("reading the link %s: %w", p, err)
	}
	resolved := filepath.Join(filepath.Dir(p), link)
	if filepath.IsAbs(link) || !strings.HasPrefix(resolved, filepath.Clean(root)+string(filepath.Separator)) {
		return nil
	}
	if err := l.dir(path.Dir(name), 0, 0, 0o755); err != nil {
		return err
	}
	return l.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(name, "/"), Linkname: link, Mode: 0o777,
		ModTime: l.modTime, Format: tar.FormatPAX,
	})
}

// layer closes the tar stream and returns it as a gzip-compressed image layer.
func (l *layerWriter) layer() (v1.Layer, error) {
	if err := l.tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	data := l.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}
