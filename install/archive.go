package install

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/ulikunitz/xz"
)

// format is what a download turned out to be.
type format int

const (
	formatRaw format = iota // the binary itself
	formatTarGz
	formatTarXz
	formatZip
)

func (f format) String() string {
	return [...]string{"raw binary", "tar.gz", "tar.xz", "zip"}[f]
}

// Magic numbers: archives, and the executables a raw download may be.
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZip  = []byte("PK\x03\x04")
	magicExec = [][]byte{
		[]byte("\x7fELF"), []byte("#!"), []byte("MZ"), // ELF, script, PE
		{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, // Mach-O, big-endian
		{0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe}, // Mach-O, little-endian
		{0xca, 0xfe, 0xba, 0xbe}, // Mach-O universal
	}
)

// sniff recognises the download at p by its first bytes. Anything that is neither a known archive
// nor an executable (an HTML error page served with 200, say) is an error.
func sniff(p string) (format, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	head := make([]byte, len(magicXz))
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read download: %w", err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return formatTarGz, nil
	case bytes.HasPrefix(head, magicXz):
		return formatTarXz, nil
	case bytes.HasPrefix(head, magicZip):
		return formatZip, nil
	}
	for _, m := range magicExec {
		if bytes.HasPrefix(head, m) {
			return formatRaw, nil
		}
	}
	return 0, fmt.Errorf("the download is not a tar.gz, tar.xz or zip archive nor an executable (it starts with %q)", head)
}

// extract checks every entry of the archive at archivePath and writes the content of the regular
// file want (extract_bin) to the new file dst. Any entry with an absolute path, a ".." component, or
// a link leading out of the archive makes the whole archive refused, whether or not it is want.
// Only dst is ever written: no other entry is extracted.
func extract(f format, archivePath, want, dst string, lim limits) error {
	if want == "" {
		return errors.New("extract_bin is required to take a binary out of an archive")
	}
	if err := checkPath(want); err != nil {
		return fmt.Errorf("extract_bin %q: %w", want, err)
	}
	want = cleanName(want)
	if want == "" {
		return errors.New("extract_bin names the archive's root, not a file")
	}
	file, err := os.Open(archivePath)
	if err != nil {
		return err
	}
	defer file.Close()
	switch f {
	case formatZip:
		st, err := file.Stat()
		if err != nil {
			return err
		}
		return extractZip(file, st.Size(), want, dst, lim)
	case formatTarGz:
		zr, err := gzip.NewReader(bufio.NewReaderSize(file, 1<<16))
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		return extractTar(zr, want, dst, lim)
	default:
		xr, err := xz.NewReader(bufio.NewReaderSize(file, 1<<16))
		if err != nil {
			return fmt.Errorf("xz: %w", err)
		}
		return extractTar(xr, want, dst, lim)
	}
}

// extractTar reads a whole tar stream (so that a bad entry after want still refuses the archive).
func extractTar(r io.Reader, want, dst string, lim limits) error {
	tr := tar.NewReader(&capReader{r: r, left: lim.unpacked})
	list := listing{want: want}
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !(errors.Is(err, tar.ErrInsecurePath) && hdr != nil) { // insecure names: refused below, with the reason
			return fmt.Errorf("read tar: %w", err)
		}
		if err := checkEntry(hdr.Name, hdr.Typeflag == tar.TypeSymlink, hdr.Typeflag == tar.TypeLink, hdr.Linkname); err != nil {
			return err
		}
		name := cleanName(hdr.Name)
		if hdr.Typeflag == tar.TypeReg {
			list.add(name)
		}
		if name != want {
			continue
		}
		switch {
		case found:
			return fmt.Errorf("extract_bin %q appears more than once in the archive", want)
		case hdr.Typeflag == tar.TypeSymlink:
			return fmt.Errorf("extract_bin %q is a symbolic link (to %q); point extract_bin at the file itself", want, hdr.Linkname)
		case hdr.Typeflag == tar.TypeLink:
			return fmt.Errorf("extract_bin %q is a hard link; point extract_bin at %q", want, hdr.Linkname)
		case hdr.Typeflag != tar.TypeReg:
			return fmt.Errorf("extract_bin %q is not a regular file (tar type %q)", want, hdr.Typeflag)
		case hdr.Size > lim.binary:
			return fmt.Errorf("extract_bin %q is %d bytes, more than the %d allowed", want, hdr.Size, lim.binary)
		}
		if err := writeNew(dst, tr, lim.binary); err != nil {
			return fmt.Errorf("extract %q: %w", want, err)
		}
		found = true
	}
	if !found {
		return list.missing()
	}
	return nil
}

// extractZip checks every entry of a zip (from its central directory), then extracts want.
func extractZip(r io.ReaderAt, size int64, want, dst string, lim limits) error {
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // insecure names: refused below, with the reason
		return fmt.Errorf("read zip: %w", err)
	}
	list := listing{want: want}
	var match *zip.File
	for _, f := range zr.File {
		symlink := f.Mode()&fs.ModeSymlink != 0
		target := ""
		if symlink {
			if target, err = zipLinkTarget(f); err != nil {
				return err
			}
		}
		if err := checkEntry(f.Name, symlink, false, target); err != nil {
			return err
		}
		name := cleanName(f.Name)
		if f.Mode().IsRegular() {
			list.add(name)
		}
		if name != want {
			continue
		}
		switch {
		case match != nil:
			return fmt.Errorf("extract_bin %q appears more than once in the archive", want)
		case symlink:
			return fmt.Errorf("extract_bin %q is a symbolic link (to %q); point extract_bin at the file itself", want, target)
		case !f.Mode().IsRegular():
			return fmt.Errorf("extract_bin %q is not a regular file (%s)", want, f.Mode().Type())
		case f.UncompressedSize64 > uint64(lim.binary):
			return fmt.Errorf("extract_bin %q is %d bytes, more than the %d allowed", want, f.UncompressedSize64, lim.binary)
		}
		match = f
	}
	if match == nil {
		return list.missing()
	}
	rc, err := match.Open()
	if err != nil {
		return fmt.Errorf("extract %q: %w", want, err)
	}
	defer rc.Close()
	if err := writeNew(dst, rc, lim.binary); err != nil {
		return fmt.Errorf("extract %q: %w", want, err)
	}
	return nil
}

// zipLinkTarget reads a zip symlink's target (its content).
func zipLinkTarget(f *zip.File) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("zip symlink %q: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return "", fmt.Errorf("zip symlink %q: %w", f.Name, err)
	}
	return string(b), nil
}

// writeNew copies at most max bytes of r into the new file dst.
func writeNew(dst string, r io.Reader, max int64) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > max {
		err = fmt.Errorf("more than the %d bytes allowed", max)
	}
	return err
}

// checkEntry refuses an archive entry whose name, or whose link target, leads outside the archive.
func checkEntry(name string, symlink, hardlink bool, target string) error {
	if err := checkPath(name); err != nil {
		return fmt.Errorf("refusing the archive: entry %q: %w", name, err)
	}
	switch {
	case hardlink:
		if err := checkPath(target); err != nil {
			return fmt.Errorf("refusing the archive: hard link %q to %q: %w", name, target, err)
		}
	case symlink:
		t := strings.ReplaceAll(target, `\`, "/")
		if t == "" || isAbs(t) {
			return fmt.Errorf("refusing the archive: symbolic link %q points to %q, outside the archive", name, target)
		}
		if r := path.Join(path.Dir(cleanName(name)), t); r == ".." || strings.HasPrefix(r, "../") {
			return fmt.Errorf("refusing the archive: symbolic link %q points to %q, outside the archive", name, target)
		}
	}
	return nil
}

// checkPath refuses a name inside an archive that is empty, absolute (a leading slash or a drive
// letter) or has a ".." component. Backslashes count as separators.
func checkPath(name string) error {
	n := strings.ReplaceAll(name, `\`, "/")
	switch {
	case n == "":
		return errors.New("empty name")
	case strings.IndexByte(n, 0) >= 0:
		return errors.New("NUL in name")
	case isAbs(n):
		return errors.New("absolute path")
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return errors.New(`".." component leads outside the archive`)
		}
	}
	return nil
}

// isAbs reports whether a slash-separated name is absolute on any platform.
func isAbs(n string) bool {
	return strings.HasPrefix(n, "/") ||
		len(n) >= 2 && n[1] == ':' && (n[0]|0x20 >= 'a' && n[0]|0x20 <= 'z')
}

// cleanName is the canonical form of a checked name: slashes, no "./" or "//" segments, no
// trailing slash ("" for the root).
func cleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+strings.ReplaceAll(name, `\`, "/")), "/")
}

// capReader fails once more than left bytes were read: a bound on decompression.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("the archive expands beyond the size allowed")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// listing remembers a few of an archive's files, to suggest the right extract_bin.
type listing struct {
	want   string
	n      int      // regular files seen
	same   []string // files with want's base name
	others []string // the first other files
}

const listShown = 8

func (l *listing) add(name string) {
	l.n++
	if path.Base(name) == path.Base(l.want) {
		if len(l.same) < listShown {
			l.same = append(l.same, name)
		}
	} else if len(l.others) < listShown {
		l.others = append(l.others, name)
	}
}

// missing is the error for an archive without want.
func (l *listing) missing() error {
	var b strings.Builder
	fmt.Fprintf(&b, "extract_bin %q is not in the archive (%d files)", l.want, l.n)
	if len(l.same) > 0 {
		fmt.Fprintf(&b, "; files named %s: %s", path.Base(l.want), strings.Join(l.same, ", "))
	}
	if len(l.others) > 0 {
		fmt.Fprintf(&b, "; other entries: %s", strings.Join(l.others, ", "))
		if rest := l.n - len(l.same) - len(l.others); rest > 0 {
			fmt.Fprintf(&b, " and %d more", rest)
		}
	}
	return errors.New(b.String())
}
